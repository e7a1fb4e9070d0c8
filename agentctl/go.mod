module github.com/toolscope/toolscope/agentctl

go 1.26.0
