package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestJSONShapesAreGolden pins the --json shape of every message of the
// public API (each response the CLI prints, and the events and log chunks
// it streams): each is filled with a value in every field and rendered as
// the CLI renders it. Run with -update after a deliberate change.
func TestJSONShapesAreGolden(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		pb.File_toolscope_orchestrator_v1_resources_proto, pb.File_toolscope_orchestrator_v1_services_proto,
		pb.File_toolscope_orchestrator_v1_auth_proto, pb.File_toolscope_orchestrator_v1_sources_proto,
	}
	upperEnum := regexp.MustCompile(`"[A-Z]+(_[A-Z0-9]+)+"`)
	quotedNumber := regexp.MustCompile(`"(generation|sequence|after_sequence)": "`)
	seen := 0
	for _, f := range files {
		for i := 0; i < f.Messages().Len(); i++ {
			md := f.Messages().Get(i)
			m := dynamicpb.NewMessage(md)
			fill(m, 0)
			got, err := marshalJSON(m, "  ")
			require.NoError(t, err, md.FullName())
			s := string(got)
			assert.NotRegexp(t, upperEnum, s, "%s: enum values are lower case", md.Name())
			assert.NotRegexp(t, quotedNumber, s, "%s: numbers are numbers", md.Name())
			if s != "{}" { // a message with no fields at all
				assert.NotContains(t, s, "{}", "%s: no empty objects", md.Name())
			}
			golden := filepath.Join("testdata", "json", string(md.Name())+".golden")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update to create %s", golden)
			assert.Equal(t, string(want), s+"\n", "%s: the JSON shape changed; if deliberate, run go test -update", md.Name())
			seen++
		}
	}
	assert.Greater(t, seen, 40, "every message of the API")
}

// fill sets every field of m to a fixed value (the first member of each
// oneof), messages down to a small depth.
func fill(m protoreflect.Message, depth int) {
	if m.Descriptor().FullName() == "google.protobuf.Timestamp" {
		ts := timestamppb.New(time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC))
		m.Set(m.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(ts.Seconds))
		return
	}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && o.Fields().Get(0) != fd {
			continue
		}
		if fd.Message() != nil && depth >= 3 {
			continue
		}
		switch {
		case fd.IsMap():
			mv := m.Mutable(fd).Map()
			mv.Set(protoreflect.ValueOfString("key").MapKey(), value(m, fd.MapValue(), mv.NewValue, depth))
		case fd.IsList():
			l := m.Mutable(fd).List()
			l.Append(value(m, fd, l.NewElement, depth))
		default:
			m.Set(fd, value(m, fd, func() protoreflect.Value { return m.NewField(fd) }, depth))
		}
	}
}

func value(m protoreflect.Message, fd protoreflect.FieldDescriptor, newValue func() protoreflect.Value, depth int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		v := newValue()
		fill(v.Message(), depth+1)
		return v
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fd.Name()))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(fd.Number()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(fd.Number()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(fd.Number()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(fd.Number()))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0.5)
	}
	panic("unhandled kind " + fd.Kind().String() + " in " + string(m.Descriptor().FullName()))
}

// TestJSONEnumsAndNumbers pins the rules on real messages: a session's
// state, an event kind as recorded, a generation as a number, and an
// empty agent left out.
func TestJSONEnumsAndNumbers(t *testing.T) {
	s := &pb.Session{Id: "sess_1", State: pb.SessionState_SESSION_STATE_RUNNING, Mode: pb.SessionMode_SESSION_MODE_PLAN,
		Agent: &pb.AgentSpec{}, PushedProviderSet: &pb.ProviderSet{Providers: []string{"github"}, Generation: 18446744073709551615}}
	b, err := marshalJSON(s, "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"sess_1","state":"running","mode":"plan","pushed_provider_set":{"providers":["github"],"generation":18446744073709551615}}`, string(b))
	e := &pb.TaskEvent{Sequence: 7, Kind: pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSH_FAILED}
	b, err = marshalJSON(e, "")
	require.NoError(t, err)
	assert.Equal(t, `{"kind":"external_tools.push_failed","sequence":7}`, string(b))
}

// TestJSONErrors: with --json an error is one object on stderr with a
// stable code, the exit code and the flag when one is at fault; stdout
// stays empty.
func TestJSONErrors(t *testing.T) {
	cases := []struct {
		args []string
		code string
		exit int
	}{
		{[]string{"--json", "task", "frobnicate"}, "invalid_argument", ExitUsage},
		{[]string{"task", "get", "--json", "--bogus"}, "invalid_argument", ExitUsage},
		{[]string{"--json", "--server", "unix://" + filepath.Join(t.TempDir(), "none.sock"), "task", "get", "t"}, "unavailable", ExitUnavailable},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		exit := Main(context.Background(), c.args, &stdout, &stderr, nil)
		assert.Equal(t, c.exit, exit, "%v: %s", c.args, stderr.String())
		assert.Empty(t, stdout.String(), c.args)
		assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %s", stderr.String())
		var got struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Exit    int    `json:"exit"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(stderr.Bytes(), &got), stderr.String())
		assert.Equal(t, c.code, got.Error.Code, c.args)
		assert.Equal(t, c.exit, got.Error.Exit, c.args)
		assert.NotEmpty(t, got.Error.Message)
	}
}
