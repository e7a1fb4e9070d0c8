module github.com/toolscope/toolscope/executors

go 1.26.0
