package standin

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// echoWriter makes a stand-in behave like the providers (some proxies and
// self-managed instances) whose error bodies echo the request's credential
// header: every answer of status 400 or more gets the header's name and
// value appended to its message and added as request_headers.
type echoWriter struct {
	http.ResponseWriter
	header, value string
	status        int
	record        func(body string)
}

func (e *echoWriter) WriteHeader(status int) {
	e.status = status
	if status < 400 {
		e.ResponseWriter.WriteHeader(status)
	}
}

func (e *echoWriter) Write(b []byte) (int, error) {
	if e.status < 400 {
		return e.ResponseWriter.Write(b)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		body = map[string]any{"message": string(bytes.TrimSpace(b))}
	}
	echo := "request had " + e.header + ": " + e.value
	switch m := body["message"].(type) {
	case string:
		body["message"] = m + " (" + echo + ")"
	case []any:
		body["message"] = append(m, echo)
	default:
		body["message"] = echo
	}
	body["request_headers"] = map[string]string{e.header: e.value}
	out, _ := json.Marshal(body)
	e.record(string(out))
	e.ResponseWriter.WriteHeader(e.status)
	if _, err := e.ResponseWriter.Write(append(out, '\n')); err != nil {
		return 0, err
	}
	return len(b), nil
}

// echo wraps w when on, for a request whose credential is in header;
// record receives each body that echoes it.
func echo(on bool, w http.ResponseWriter, r *http.Request, header string, record func(string)) http.ResponseWriter {
	if !on {
		return w
	}
	return &echoWriter{ResponseWriter: w, header: header, value: r.Header.Get(header), status: http.StatusOK, record: record}
}
