package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// pages are the parsed templates: each page with the layout and the
// partials, and the fragments htmx swaps in on their own.
type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"join": strings.Join,
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: odd arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, errors.New("dict: key not a string")
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"short": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n-1]) + "…"
		}
		return s
	},
	"pretty": func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return ""
		}
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	"providers": func(ps model.ProviderSet) string {
		if ps.Set.IsEmpty() {
			return "none"
		}
		return ps.Set.String()
	},
}

func parsePages() (*pages, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "templates/page_*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range names {
		t, err := template.Must(base.Clone()).ParseFS(files, n)
		if err != nil {
			return nil, err
		}
		p.byName[strings.TrimSuffix(strings.TrimPrefix(path.Base(n), "page_"), ".html")] = t
	}
	p.byName["partials"] = base
	return p, nil
}

// view is what every page template gets.
type view struct {
	Me    Me
	Title string
	Nav   string
	D     map[string]any
}

// render answers with a whole page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, me Me, d map[string]any) {
	t, ok := c.pages.byName[name]
	if !ok {
		c.opts.Log.Error("console: no such page", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	title, _ := d["Title"].(string)
	if err := t.ExecuteTemplate(&buf, "layout", view{Me: me, Title: title, Nav: name, D: d}); err != nil {
		c.opts.Log.Error("console: render", "page", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fragment answers with one partial template (an htmx swap).
func (c *Console) fragment(w http.ResponseWriter, name string, me Me, d map[string]any) {
	var buf bytes.Buffer
	if err := c.pages.byName["partials"].ExecuteTemplate(&buf, name, view{Me: me, D: d}); err != nil {
		c.opts.Log.Error("console: render", "fragment", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// fail answers with an error page (or, to htmx, the message alone).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, me Me, status int, msg string) {
	if r.Header.Get("HX-Request") != "" {
		c.fragment(w, "problem", me, map[string]any{"Message": msg})
		return
	}
	c.render(w, r, status, "error", me, map[string]any{"Title": http.StatusText(status), "Message": msg, "Status": status})
}

// failErr answers with what err says a person can act on.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, me Me, err error) {
	c.fail(w, r, me, statusOf(err), c.explain(r, err))
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrAlreadyExists):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrPermissionDenied):
		return http.StatusForbidden
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// explain says what err means to a person. The service's classified errors
// name fields and states, never secrets; an unclassified one is logged and
// told generically, as the gRPC API does.
func (c *Console) explain(r *http.Request, err error) string {
	if statusOf(err) == http.StatusInternalServerError {
		c.opts.Log.Error("console: request failed", "path", r.URL.Path, "error", err.Error())
		return "The orchestrator could not do this (an internal error; its log has the detail)."
	}
	return err.Error()
}

func (c *Console) see(w http.ResponseWriter, r *http.Request, to string, args ...any) {
	http.Redirect(w, r, fmt.Sprintf(to, args...), http.StatusSeeOther)
}
