package plugin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// TestWireHandler: a plugin's records are lines in the form go-plugin's
// host parses.
func TestWireHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(newWireHandler(&buf))
	log.Warn("disk low", "free", 3, slog.Group("vm", "id", "i-1"))
	log.Log(t.Context(), slog.LevelDebug-4, "tick")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var warn map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &warn))
	require.Equal(t, "warn", warn["@level"])
	require.Equal(t, "disk low", warn["@message"])
	require.EqualValues(t, 3, warn["free"])
	require.Equal(t, map[string]any{"id": "i-1"}, warn["vm"])
	ts, ok := warn["@timestamp"].(string)
	require.True(t, ok)
	_, err := time.Parse(hclogTime, ts)
	require.NoError(t, err)
	var tick map[string]any
	require.NoError(t, json.Unmarshal(lines[1], &tick))
	require.Equal(t, "trace", tick["@level"])
}

// TestHCLogAdapter: go-plugin's logging calls become records of the
// host's handler, at its levels.
func TestHCLogAdapter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newHCLogAdapter(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	require.Equal(t, hclog.Info, l.GetLevel())
	require.False(t, l.IsDebug())
	require.True(t, l.IsWarn())

	l.Debug("dropped")
	l.Named("vm").With("pool", "linux").Warn("slow boot", "seconds", 90, "timestamp", "2026-01-02T03:04:05.678Z")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), "one record: %s", buf.String())
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "slow boot", rec["msg"])
	require.Equal(t, "vm", rec["logger"])
	require.Equal(t, "linux", rec["pool"])
	require.EqualValues(t, 90, rec["seconds"])
	require.Equal(t, "2026-01-02T03:04:05.678Z", rec["time"], "the plugin's time of the line")
	require.NotContains(t, rec, "timestamp")

	buf.Reset()
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("from the log package")
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	require.Equal(t, "ERROR", rec["level"])
	require.Equal(t, "from the log package", rec["msg"])
}

func TestLineWriter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := &lineWriter{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))}
	_, err := w.Write([]byte("one\ntw"))
	require.NoError(t, err)
	_, err = w.Write([]byte("o\nthree"))
	require.NoError(t, err)
	require.Equal(t, "level=INFO msg=one\nlevel=INFO msg=two\n", buf.String(), "a record a complete line")
}
