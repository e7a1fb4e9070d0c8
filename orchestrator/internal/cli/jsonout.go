package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/orchestrator/internal/api/eventkind"
)

// The CLI's JSON is the response message in the shape scripts expect, not
// protojson's: field names as in the proto, enum values lower case without
// their type's prefix ("running"; event kinds as the orchestrator records
// them, "providers.pushed"), 64-bit integers as numbers, and no empty
// objects or lists. Well-known types (timestamps) keep protojson's form.

// marshalJSON renders msg; indent "" gives one line (JSON lines streams).
func marshalJSON(msg proto.Message, indent string) ([]byte, error) {
	if msg == nil {
		return []byte("{}"), nil
	}
	v, err := jsonValue(msg.ProtoReflect())
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = map[string]any{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// jsonValue is m as a JSON object, or nil when it holds nothing.
func jsonValue(m protoreflect.Message) (any, error) {
	if strings.HasPrefix(string(m.Descriptor().FullName()), "google.protobuf.") {
		b, err := protojson.Marshal(m.Interface())
		if err != nil {
			return nil, err
		}
		return json.RawMessage(b), nil
	}
	obj := map[string]any{}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		var out any
		switch {
		case fd.IsList():
			l := v.List()
			items := make([]any, 0, l.Len())
			for i := 0; i < l.Len(); i++ {
				var item any
				if item, err = scalarJSON(fd, l.Get(i)); err != nil {
					return false
				}
				if item != nil {
					items = append(items, item)
				}
			}
			if len(items) > 0 {
				out = items
			}
		case fd.IsMap():
			mm := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				var item any
				if item, err = scalarJSON(fd.MapValue(), mv); err != nil {
					return false
				}
				if item != nil {
					mm[k.String()] = item
				}
				return true
			})
			if len(mm) > 0 {
				out = mm
			}
		default:
			out, err = scalarJSON(fd, v)
		}
		if err != nil {
			return false
		}
		if out != nil {
			obj[string(fd.Name())] = out
		}
		return true
	})
	if err != nil || len(obj) == 0 {
		return nil, err
	}
	return obj, nil
}

// scalarJSON is one value of field fd (a list element or a singular field).
func scalarJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		out, err := jsonValue(v.Message())
		if out == nil || err != nil {
			return nil, err // an empty object is left out
		}
		return out, nil
	case protoreflect.EnumKind:
		return enumName(fd.Enum(), v.Enum()), nil
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), nil
	}
	return v.Interface(), nil
}

// enumName is "running" for SESSION_STATE_RUNNING, and a task event kind
// as the orchestrator records it ("providers.pushed").
func enumName(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) any {
	if ed.FullName() == (pb.TaskEventKind(0)).Descriptor().FullName() {
		if name := eventkind.Name(pb.TaskEventKind(n)); name != "" {
			return name
		}
	}
	vd := ed.Values().ByNumber(n)
	if vd == nil {
		return int32(n)
	}
	prefix := screamingSnake(string(ed.Name())) + "_"
	return strings.ToLower(strings.TrimPrefix(string(vd.Name()), prefix))
}

// screamingSnake is SESSION_STATE for SessionState.
func screamingSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
