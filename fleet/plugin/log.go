package plugin

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Logs cross from plugin to host on the plugin's standard error, one JSON
// object a line in the form go-plugin's host parses (hclog's): "@level",
// "@message", "@timestamp" and the record's attributes. The host hands each
// line to its hclog.Logger, which here is an adapter that writes to the
// host's slog.Handler.

// stderr is the plugin process's standard error as it was when the
// process started: go-plugin's Serve replaces os.Stderr with a pipe of its
// own, and only the original reaches the host's log parser.
var stderr = os.Stderr

// hclogTime is the form go-plugin's host parses "@timestamp" in.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

// NewLogger returns the logger a plugin's backend should log with: its
// records reach the host's Config.Logger with their level and attributes.
// It logs at every level; the host's handler decides what it keeps.
func NewLogger() *slog.Logger { return slog.New(newWireHandler(stderr)) }

func newWireHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug - 4,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format(hclogTime))
			case slog.LevelKey:
				lvl, _ := a.Value.Any().(slog.Level)
				return slog.String("@level", fromSlogLevel(lvl).String())
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	})
}

func fromSlogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// hclogAdapter is an hclog.Logger that writes to a slog.Handler: it is
// how go-plugin's own logs, and the plugin's lines it parses, reach the
// host's logger (and, in a plugin, how go-plugin's server logs in the
// wire form).
type hclogAdapter struct {
	h    slog.Handler
	name string
	args []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLogAdapter(h slog.Handler) *hclogAdapter { return &hclogAdapter{h: h} }

func (l *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	sl := toSlogLevel(level)
	ctx := context.Background()
	if !l.h.Enabled(ctx, sl) {
		return
	}
	t := time.Now()
	// go-plugin appends the time a plugin's line was written; it is the
	// better time for the record.
	if n := len(args); n >= 2 && args[n-2] == "timestamp" {
		if s, ok := args[n-1].(string); ok {
			if pt, err := time.Parse(hclog.TimeFormat, s); err == nil {
				t, args = pt, args[:n-2]
			}
		}
	}
	r := slog.NewRecord(t, sl, msg, 0)
	if l.name != "" {
		r.AddAttrs(slog.String("logger", l.name))
	}
	r.Add(l.args...)
	r.Add(args...)
	_ = l.h.Handle(ctx, r)
}

func (l *hclogAdapter) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *hclogAdapter) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *hclogAdapter) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *hclogAdapter) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *hclogAdapter) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *hclogAdapter) enabled(level hclog.Level) bool {
	return l.h.Enabled(context.Background(), toSlogLevel(level))
}

func (l *hclogAdapter) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *hclogAdapter) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *hclogAdapter) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *hclogAdapter) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *hclogAdapter) IsError() bool { return l.enabled(hclog.Error) }

func (l *hclogAdapter) ImpliedArgs() []any { return l.args }

func (l *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{h: l.h, name: l.name, args: append(l.args[:len(l.args):len(l.args)], args...)}
}

func (l *hclogAdapter) Name() string { return l.name }

func (l *hclogAdapter) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return &hclogAdapter{h: l.h, name: name, args: l.args}
}

func (l *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{h: l.h, name: name, args: l.args}
}

// SetLevel does nothing: the slog.Handler decides which levels it keeps.
func (l *hclogAdapter) SetLevel(hclog.Level) {}

// GetLevel is the lowest level the handler keeps; go-plugin skips parsing
// plugin lines below it.
func (l *hclogAdapter) GetLevel() hclog.Level {
	for _, level := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if l.enabled(level) {
			return level
		}
	}
	return hclog.Off
}

func (l *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = toSlogLevel(opts.ForceLevel)
	}
	h := slog.New(l.h).With(l.args...).Handler()
	if l.name != "" {
		h = h.WithAttrs([]slog.Attr{slog.String("logger", l.name)})
	}
	return slog.NewLogLogger(h, level)
}

func (l *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return l.StandardLogger(opts).Writer()
}

// lineWriter logs what a plugin writes to its os.Stdout or os.Stderr
// after Serve started (go-plugin streams both to the host), a record a
// line.
type lineWriter struct {
	log     *slog.Logger
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.log.Info(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}
