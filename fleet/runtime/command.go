package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets/mask"
)

// Command is one workflow command a step wrote to its output:
// ::name key=value,key=value::message.
type Command struct {
	// Name is the command, as written ("error", "add-mask", or a
	// stop-commands token).
	Name string
	// Properties are its key=value pairs, unescaped; nil when none.
	Properties map[string]string
	// Message is what follows the second "::", unescaped.
	Message string
}

// ParseCommand reads a workflow command from one line of output (without
// its newline), as GitHub's runner does: leading spaces are skipped, the
// line starts with "::", the command name runs to the first space or
// "::", properties are comma-separated key=value pairs up to the next
// "::", and the rest is the message. Properties are unescaped from %25,
// %0D, %0A, %3A and %2C; the message from %25, %0D and %0A. A pair
// without "=" or with an empty key or value is left out, as GitHub does.
// It reports false for a line that is not a command; it does not check
// the name against the commands it knows.
func ParseCommand(line string) (Command, bool) {
	line = strings.TrimLeft(line, " \t")
	line = strings.TrimSuffix(line, "\r")
	rest, ok := strings.CutPrefix(line, "::")
	if !ok {
		return Command{}, false
	}
	info, msg, ok := strings.Cut(rest, "::")
	if !ok {
		return Command{}, false
	}
	name, props, _ := strings.Cut(info, " ")
	if name == "" {
		return Command{}, false
	}
	c := Command{Name: name, Message: unescape(msg, false)}
	for _, pair := range strings.Split(props, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" || v == "" {
			continue
		}
		if c.Properties == nil {
			c.Properties = map[string]string{}
		}
		c.Properties[k] = unescape(v, true)
	}
	return c, true
}

// unescape undoes GitHub's escaping of command data (and, with property,
// of property values) in one pass, so that an escaped "%" is never read
// again as the start of an escape.
func unescape(s string, property bool) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			code := strings.ToUpper(s[i+1 : i+3])
			var r string
			switch code {
			case "25":
				r = "%"
			case "0D":
				r = "\r"
			case "0A":
				r = "\n"
			case "3A":
				if property {
					r = ":"
				}
			case "2C":
				if property {
					r = ","
				}
			}
			if r != "" {
				b.WriteString(r)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// EscapeData escapes a workflow command's message the way GitHub's
// toolkit does, the inverse of ParseCommand's unescaping.
func EscapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// EscapeProperty escapes a workflow command's property value the way
// GitHub's toolkit does.
func EscapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// Markers the log keeps where a step wrote a workflow command, in GitHub's
// log syntax, so that the log UI folds groups and highlights annotations.
const (
	// GroupMarker starts a line "##[group]Title": the lines up to the
	// next EndGroupMarker line fold under Title.
	GroupMarker = "##[group]"
	// EndGroupMarker is the whole line that ends a group.
	EndGroupMarker = "##[endgroup]"
	// ErrorMarker, WarningMarker, NoticeMarker and DebugMarker start the
	// line an ::error, ::warning, ::notice or ::debug command leaves in
	// the log, followed by its message.
	ErrorMarker   = "##[error]"
	WarningMarker = "##[warning]"
	NoticeMarker  = "##[notice]"
	DebugMarker   = "##[debug]"
)

// DefaultMaxLineBytes is the longest line a CommandWriter reads as one: 256
// KiB. A longer line is written out in pieces of that size, masked piece
// by piece, and never read as a command.
const DefaultMaxLineBytes = 256 << 10

// MaskReplacement is what a masked value is replaced with in the log.
const MaskReplacement = mask.Replacement

// MaxStepMasks and MaxStepMaskBytes bound the values a job's steps
// register with ::add-mask::, which every later line is searched for and
// the writer keeps: 1,000 values, 1 MiB together. Values the executor
// registers (CommandWriter.AddMask, the job's secrets) do not count.
const (
	MaxStepMasks     = 1000
	MaxStepMaskBytes = 1 << 20
)

// CommandOptions configure a CommandWriter.
type CommandOptions struct {
	// MaxLineBytes bounds a line; zero means DefaultMaxLineBytes.
	MaxLineBytes int
	// MaxAnnotations bounds the annotations kept; zero means
	// cikit.MaxAnnotations.
	MaxAnnotations int
	// Masker masks the output and the annotations; the values steps
	// register with ::add-mask:: are added to it. The executor gives the
	// job's, which holds the job's secrets; nil means a new one of the
	// writer's own.
	Masker *mask.Masker
}

// CommandWriter is the io.Writer a job's output goes through. It passes
// the output on line by line and acts on GitHub's workflow commands:
//
//   - ::add-mask::value adds value to the writer's mask.Masker: it
//     (its lines, its encodings) is masked with MaskReplacement from the
//     command on, of this step and the later ones, and in annotations;
//     the command's own line is not written. Steps register at most
//     MaxStepMasks values, MaxStepMaskBytes, this way; past it, and for a
//     value shorter than mask.MinValueBytes, the log says the value is
//     not masked;
//   - ::error, ::warning and ::notice (properties file, line, endLine,
//     col, endColumn, title) record a cikit.Annotation, at most
//     CommandOptions.MaxAnnotations of them, counting those dropped, and
//     leave ErrorMarker, WarningMarker or NoticeMarker and the message in
//     the log;
//   - ::debug::message leaves DebugMarker and the message;
//   - ::group::title and ::endgroup:: leave GroupMarker and title, and
//     EndGroupMarker;
//   - ::set-output name=x::value (deprecated) records the step's output x,
//     read by the caller after the step (StepOutputs); the log says the
//     command is deprecated;
//   - ::stop-commands::TOKEN writes every later line as it is, commands
//     too, until a line ::TOKEN::;
//   - ::echo::on and ::echo::off make command lines also be written as
//     they are;
//   - ::set-env and ::add-path, disabled on GitHub, and ::add-matcher,
//     ::remove-matcher and ::save-state, not supported, leave an error or
//     a warning line that says so;
//   - any other line, unknown commands included, is written as it is,
//     masked.
//
// Everything it writes goes through one mask.Writer of its
// Masker, which masks a value also across lines written in pieces; Flush
// writes what that holds back.
//
// Annotations carry the name of the step given to BeginStep. A
// CommandWriter is safe for concurrent use; it writes to out under its
// lock, in order.
type CommandWriter struct {
	mu        sync.Mutex
	out       io.Writer
	maxLine   int
	maxAnn    int
	buf       []byte
	masker    *mask.Masker
	mw        *mask.Writer
	stepMasks int // masks registered by ::add-mask::, and their bytes
	maskBytes int
	anns      []cikit.Annotation
	dropped   int
	step      string
	outputs   map[string]string
	stopToken string
	echo      bool
	long      bool // buf continues a line longer than maxLine
	err       error
}

// NewCommandWriter returns a CommandWriter writing to out.
func NewCommandWriter(out io.Writer, opts CommandOptions) *CommandWriter {
	w := &CommandWriter{out: out, maxLine: opts.MaxLineBytes, maxAnn: opts.MaxAnnotations, masker: opts.Masker}
	if w.masker == nil {
		w.masker = mask.New()
	}
	w.mw = w.masker.Writer(out)
	if w.maxLine <= 0 {
		w.maxLine = DefaultMaxLineBytes
	}
	if w.maxAnn <= 0 {
		w.maxAnn = cikit.MaxAnnotations
	}
	return w
}

// BeginStep starts a step: its annotations carry name, and its outputs,
// ::stop-commands:: and ::echo:: start afresh. Masks hold on.
// Call Flush at the end of the previous step first.
func (w *CommandWriter) BeginStep(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.step = name
	w.outputs = nil
	w.stopToken = ""
	w.echo = false
}

// AddMask masks value from now on, as ::add-mask:: does, with its lines
// and encodings (mask.Masker.Add): the executor registers the job's
// secrets with it, unless it gave its Masker in CommandOptions. It fails,
// and masks nothing, for a value shorter than mask.MinValueBytes
// (mask.ErrTooShort) or past the Masker's bounds.
func (w *CommandWriter) AddMask(value string) error {
	return w.masker.Add(value)
}

// Mask returns s with every masked value replaced by MaskReplacement.
func (w *CommandWriter) Mask(s string) string {
	return w.masker.String(s)
}

func (w *CommandWriter) mask(s string) string { return w.masker.String(s) }

// Write passes p on, line by line. It fails only when out failed; from
// then on it fails at once with that error.
func (w *CommandWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 && w.err == nil {
		i := bytes.IndexByte(p, '\n')
		end := i
		if i < 0 {
			end = len(p)
		}
		if room := w.maxLine - len(w.buf); end > room {
			// Too long for a line: out it goes in a piece, and the rest
			// of the line is never read as a command. A line of exactly
			// maxLine bytes is one, whether its newline comes in this
			// write or a later one.
			w.buf = append(w.buf, p[:room]...)
			p = p[room:]
			w.emitBytes(w.buf)
			w.buf = w.buf[:0]
			w.long = true
			continue
		}
		w.buf = append(w.buf, p[:end]...)
		if i < 0 {
			break
		}
		p = p[i+1:]
		if w.long || !mayBeCommand(w.buf) {
			w.long = false
			w.plain()
		} else {
			w.line(string(w.buf))
		}
		w.buf = w.buf[:0]
	}
	if w.err != nil {
		return 0, w.err
	}
	return n, nil
}

// Flush handles a last line without a newline, at the end of a step,
// and writes out what the masking held back.
func (w *CommandWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && len(w.buf) > 0 {
		if w.long || !mayBeCommand(w.buf) {
			w.plain()
		} else {
			w.line(string(w.buf))
		}
		w.buf = w.buf[:0]
	}
	w.long = false
	if w.err == nil {
		w.err = w.mw.Flush()
	}
	return w.err
}

// emitBytes writes b through the masking, without a newline.
func (w *CommandWriter) emitBytes(b []byte) {
	if w.err == nil {
		_, w.err = w.mw.Write(b)
	}
}

// writeLine writes one line, masked, with its newline.
func (w *CommandWriter) writeLine(s string) {
	if w.err == nil {
		_, w.err = io.WriteString(w.mw, s+"\n")
	}
}

// mayBeCommand reports whether a line could be a workflow command: it
// starts with "::" after spaces. Other lines skip ParseCommand.
func mayBeCommand(line []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("::"))
}

// plain writes w.buf, a line that is no command, with its newline,
// masked, without a copy.
func (w *CommandWriter) plain() {
	w.buf = append(w.buf, '\n')
	w.emitBytes(w.buf)
}

func (w *CommandWriter) line(raw string) {
	c, ok := ParseCommand(raw)
	if w.stopToken != "" {
		if ok && c.Name == w.stopToken {
			w.stopToken = ""
			return
		}
		w.writeLine(raw)
		return
	}
	if !ok || !knownCommands[c.Name] {
		w.writeLine(raw)
		return
	}
	if w.echo && c.Name != "add-mask" {
		w.writeLine(raw)
	}
	switch c.Name {
	case "add-mask":
		w.addMask(c.Message)
		if w.echo {
			// Echoed once masked.
			w.writeLine(raw)
		}
	case "error", "warning", "notice":
		w.annotate(c)
	case "debug":
		w.writeLine(DebugMarker + c.Message)
	case "group":
		w.writeLine(GroupMarker + c.Message)
	case "endgroup":
		w.writeLine(EndGroupMarker)
	case "set-output":
		name := c.Properties["name"]
		if name == "" {
			w.writeLine(WarningMarker + "::set-output:: without a name= property sets no output")
			return
		}
		if w.outputs == nil {
			w.outputs = map[string]string{}
		}
		w.outputs[name] = c.Message
		w.writeLine(WarningMarker + "The `set-output` command is deprecated; write to the file named by $GITHUB_OUTPUT instead")
	case "save-state":
		w.writeLine(WarningMarker + "The `save-state` command is not supported: its state is for the post step of a JavaScript action, which is not run here")
	case "stop-commands":
		if c.Message == "" {
			w.writeLine(WarningMarker + "::stop-commands:: needs a token: ::stop-commands::TOKEN, resumed by ::TOKEN::")
			return
		}
		w.stopToken = c.Message
	case "echo":
		switch strings.ToLower(c.Message) {
		case "on":
			w.echo = true
		case "off":
			w.echo = false
		default:
			w.writeLine(WarningMarker + "::echo:: takes on or off, not " + strconv.Quote(c.Message))
		}
	case "set-env", "add-path":
		file := map[string]string{"set-env": "GITHUB_ENV", "add-path": "GITHUB_PATH"}[c.Name]
		w.writeLine(ErrorMarker + "The `" + c.Name + "` command is disabled; write to the file named by $" + file + " instead")
	case "add-matcher", "remove-matcher":
		w.writeLine(WarningMarker + "The `" + c.Name + "` command is not supported: problem matchers are not applied")
	}
}

// addMask registers an ::add-mask:: value, within the steps' bounds.
func (w *CommandWriter) addMask(value string) {
	if w.stepMasks >= MaxStepMasks || w.maskBytes+len(value) > MaxStepMaskBytes {
		w.writeLine(WarningMarker + fmt.Sprintf("::add-mask:: past %d values or %s: this value is not masked", MaxStepMasks, cikit.FormatBytes(MaxStepMaskBytes)))
		return
	}
	err := w.masker.Add(value)
	switch {
	case errors.Is(err, mask.ErrTooShort):
		w.writeLine(WarningMarker + fmt.Sprintf("::add-mask:: this value is not masked: it is shorter than %d bytes, and masking it would hide ordinary text", mask.MinValueBytes))
		return
	case err != nil:
		// The error says why without the value.
		w.writeLine(WarningMarker + "::add-mask:: this value is not masked: " + strings.TrimPrefix(err.Error(), "secrets: "))
		return
	}
	w.stepMasks++
	w.maskBytes += len(value)
}

// knownCommands are the workflow commands CommandWriter acts on; other
// ::name:: lines are ordinary output, as on GitHub.
var knownCommands = map[string]bool{
	"add-mask": true, "error": true, "warning": true, "notice": true, "debug": true,
	"group": true, "endgroup": true, "set-output": true, "save-state": true,
	"stop-commands": true, "echo": true, "set-env": true, "add-path": true,
	"add-matcher": true, "remove-matcher": true,
}

func (w *CommandWriter) annotate(c Command) {
	a := cikit.Annotation{Level: c.Name, Message: w.mask(c.Message), Step: w.step}
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(c.Properties)) {
		v := c.Properties[k]
		var dst *int
		switch k {
		case "file":
			a.File = w.mask(v)
		case "title":
			a.Title = w.mask(v)
		case "line":
			dst = &a.Line
		case "endLine":
			dst = &a.EndLine
		case "col":
			dst = &a.Col
		case "endColumn":
			dst = &a.EndColumn
		default:
			bad = append(bad, fmt.Sprintf("unknown property %q", k))
		}
		if dst != nil {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				bad = append(bad, fmt.Sprintf("%s=%q is not a positive number", k, v))
				continue
			}
			*dst = n
		}
	}
	marker := map[string]string{"error": ErrorMarker, "warning": WarningMarker, "notice": NoticeMarker}[c.Name]
	w.writeLine(marker + strings.ReplaceAll(c.Message, "\n", "\n"+marker))
	if len(bad) > 0 {
		w.writeLine(WarningMarker + "::" + c.Name + ":: " + strings.Join(bad, ", ") + "; the annotation is kept without it")
	}
	if len(w.anns) >= w.maxAnn {
		w.dropped++
		return
	}
	w.anns = append(w.anns, a)
}

// Annotations returns the annotations recorded so far, in order, and how
// many were dropped past the limit.
func (w *CommandWriter) Annotations() ([]cikit.Annotation, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.anns), w.dropped
}

// StepOutputs returns the outputs the current step set with ::set-output.
// Outputs written to GITHUB_OUTPUT take precedence over them.
func (w *CommandWriter) StepOutputs() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.outputs)
}
