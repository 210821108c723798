package runtime_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/runtime"
	"github.com/cikit/cikit/secrets/mask"
)

var commandLines = []struct {
	line string
	want runtime.Command
	ok   bool
}{
	{"::group::Build", runtime.Command{Name: "group", Message: "Build"}, true},
	{"::endgroup::", runtime.Command{Name: "endgroup"}, true},
	{"  ::add-mask::s3cr3t", runtime.Command{Name: "add-mask", Message: "s3cr3t"}, true},
	{"::error file=app.js,line=10,col=15::Something went wrong", runtime.Command{Name: "error", Properties: map[string]string{"file": "app.js", "line": "10", "col": "15"}, Message: "Something went wrong"}, true},
	{"::warning title=a%3Ab%2Cc%25::x%0Ay%0D%25z%3A", runtime.Command{Name: "warning", Properties: map[string]string{"title": "a:b,c%"}, Message: "x\ny\r%z%3A"}, true},
	{"::notice::%250A stays escaped once", runtime.Command{Name: "notice", Message: "%0A stays escaped once"}, true},
	{"::error file=,line=3,bare::m", runtime.Command{Name: "error", Properties: map[string]string{"line": "3"}, Message: "m"}, true},
	{"::set-output name=x::a::b", runtime.Command{Name: "set-output", Properties: map[string]string{"name": "x"}, Message: "a::b"}, true},
	{"::debug::trailing cr\r", runtime.Command{Name: "debug", Message: "trailing cr"}, true},
	{"::%::", runtime.Command{Name: "%"}, true},
	{"no command", runtime.Command{}, false},
	{"::no end", runtime.Command{}, false},
	{":::: empty name", runtime.Command{}, false},
	{":: space::x", runtime.Command{}, false},
	{"x ::error::not at start", runtime.Command{}, false},
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range commandLines {
		got, ok := runtime.ParseCommand(tt.line)
		require.Equal(t, tt.ok, ok, tt.line)
		require.Empty(t, cmp.Diff(tt.want, got), tt.line)
	}
}

func TestEscapeRoundTrip(t *testing.T) {
	t.Parallel()
	msg := "100% done\r\n:next, %0A"
	prop := "a:b,c%25\nd"
	c, ok := runtime.ParseCommand("::warning title=" + runtime.EscapeProperty(prop) + "::" + runtime.EscapeData(msg))
	require.True(t, ok)
	require.Equal(t, msg, c.Message)
	require.Equal(t, prop, c.Properties["title"])
}

// run writes each step's output through one CommandWriter and returns the
// log.
func run(t *testing.T, opts runtime.CommandOptions, steps ...string) (string, *runtime.CommandWriter) {
	t.Helper()
	var log strings.Builder
	w := runtime.NewCommandWriter(&log, opts)
	for i, out := range steps {
		w.BeginStep(fmt.Sprintf("step %d", i+1))
		_, err := w.Write([]byte(out))
		require.NoError(t, err)
		require.NoError(t, w.Flush())
	}
	return log.String(), w
}

func TestCommandWriterMasks(t *testing.T) {
	t.Parallel()
	log, w := run(t, runtime.CommandOptions{},
		"before s3cr3t\n::add-mask::s3cr3t\nafter s3cr3t and s3cr3t\n::add-mask::two%0Alines\n",
		"later s3cr3t, two, lines\n::error title=s3cr3t::leaked s3cr3t?\n::add-mask:: \nspaces kept\n",
	)
	// "two" is shorter than mask.MinValueBytes: as a line of a value
	// it is not masked alone (the whole value is), and a blank value is
	// refused with a warning.
	require.Equal(t, "before s3cr3t\nafter *** and ***\nlater ***, two, ***\n##[error]leaked ***?\n"+
		"##[warning]::add-mask:: this value is not masked: it is shorter than 4 bytes, and masking it would hide ordinary text\nspaces kept\n", log)
	anns, _ := w.Annotations()
	require.Equal(t, []cikit.Annotation{{Level: "error", Title: "***", Message: "leaked ***?", Step: "step 2"}}, anns)
	require.Equal(t, "x *** y", w.Mask("x s3cr3t y"))

}

func TestCommandWriterAddMask(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	w := runtime.NewCommandWriter(&log, runtime.CommandOptions{})
	require.NoError(t, w.AddMask("api-key"))
	require.ErrorIs(t, w.AddMask(""), mask.ErrTooShort)
	require.NoError(t, w.AddMask("multi\nline\r\nsecret"))
	w.BeginStep("s")
	_, err := w.Write([]byte("the api-key is set; multi line secret\n"))
	require.NoError(t, err)
	require.Equal(t, "the *** is set; *** *** ***\n", log.String())
}

func TestCommandWriterMaskLimit(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	for i := range runtime.MaxStepMasks + 1 {
		fmt.Fprintf(&out, "::add-mask::value-%05d\n", i)
	}
	out.WriteString("value-00000 value-01000\n")
	var log strings.Builder
	w := runtime.NewCommandWriter(&log, runtime.CommandOptions{})
	w.AddMask("executor-secret")
	w.BeginStep("s")
	_, err := w.Write([]byte(out.String()))
	require.NoError(t, err)
	w.AddMask("another-secret")
	_, err = w.Write([]byte("executor-secret another-secret\n"))
	require.NoError(t, err)
	require.Equal(t, "##[warning]::add-mask:: past 1000 values or 1 MiB: this value is not masked\n*** value-01000\n*** ***\n", log.String())

	// Values are at most mask.MaxValueBytes: 16 of them fill
	// MaxStepMaskBytes.
	log.Reset()
	w = runtime.NewCommandWriter(&log, runtime.CommandOptions{MaxLineBytes: 2 << 20})
	w.BeginStep("s")
	out.Reset()
	for i := range runtime.MaxStepMaskBytes/mask.MaxValueBytes + 1 {
		fmt.Fprintf(&out, "::add-mask::%c%s\n", 'a'+i, strings.Repeat("x", mask.MaxValueBytes-1))
	}
	_, err = w.Write([]byte(out.String()))
	require.NoError(t, err)
	require.Equal(t, "##[warning]::add-mask:: past 1000 values or 1 MiB: this value is not masked\n", log.String())
	log.Reset()
	_, err = w.Write([]byte("::add-mask::" + strings.Repeat("z", mask.MaxValueBytes+1) + "\n"))
	require.NoError(t, err)
	require.Contains(t, log.String(), "this value is not masked")
}

func TestCommandWriterMaskOverlaps(t *testing.T) {
	t.Parallel()
	log, _ := run(t, runtime.CommandOptions{}, "::add-mask::abcd\n::add-mask::abcdefg\n::add-mask::efghij\n::add-mask::****\nabcdefg abcd abcdefghij a****c\n")
	require.Equal(t, "*** *** *** a***c\n", log, "values are hidden whole, and a mask never matches another's replacement")
}

func TestCommandWriterAnnotations(t *testing.T) {
	t.Parallel()
	log, w := run(t, runtime.CommandOptions{},
		"::error file=main.go,line=3,endLine=4,col=2,endColumn=9,title=Vet::unreachable code\n"+
			"::warning::plain\n::notice line=x,col=0,severity=high::odd%0Aproperties\n")
	anns, dropped := w.Annotations()
	require.Zero(t, dropped)
	require.Equal(t, []cikit.Annotation{
		{Level: "error", Message: "unreachable code", Title: "Vet", File: "main.go", Line: 3, EndLine: 4, Col: 2, EndColumn: 9, Step: "step 1"},
		{Level: "warning", Message: "plain", Step: "step 1"},
		{Level: "notice", Message: "odd\nproperties", Step: "step 1"},
	}, anns)
	require.Equal(t, "##[error]unreachable code\n##[warning]plain\n##[notice]odd\n##[notice]properties\n"+
		`##[warning]::notice:: col="0" is not a positive number, line="x" is not a positive number, unknown property "severity"; the annotation is kept without it`+"\n", log)
}

func TestCommandWriterAnnotationLimit(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	for i := range 5 {
		fmt.Fprintf(&out, "::warning::w%d\n", i)
	}
	_, w := run(t, runtime.CommandOptions{MaxAnnotations: 3}, out.String())
	anns, dropped := w.Annotations()
	require.Len(t, anns, 3)
	require.Equal(t, "w2", anns[2].Message)
	require.Equal(t, 2, dropped)

	_, w = run(t, runtime.CommandOptions{}, strings.Repeat("::notice::n\n", cikit.MaxAnnotations+7))
	anns, dropped = w.Annotations()
	require.Len(t, anns, cikit.MaxAnnotations)
	require.Equal(t, 7, dropped)
}

func TestCommandWriterGroupsAndOthers(t *testing.T) {
	t.Parallel()
	log, w := run(t, runtime.CommandOptions{},
		"::group::Install\nnpm ci\n::endgroup::\n::debug::d\n::unknown::kept\n::set-output name=v::1.2\n::set-output::nameless\n"+
			"::set-env name=A::1\n::add-path::/x\n::add-matcher::m.json\n::save-state name=s::1\n::echo::on\n::group::G\n::echo::off\n::endgroup::\n::echo::maybe\n")
	require.Equal(t, strings.Join([]string{
		"##[group]Install", "npm ci", "##[endgroup]", "##[debug]d", "::unknown::kept",
		"##[warning]The `set-output` command is deprecated; write to the file named by $GITHUB_OUTPUT instead",
		"##[warning]::set-output:: without a name= property sets no output",
		"##[error]The `set-env` command is disabled; write to the file named by $GITHUB_ENV instead",
		"##[error]The `add-path` command is disabled; write to the file named by $GITHUB_PATH instead",
		"##[warning]The `add-matcher` command is not supported: problem matchers are not applied",
		"##[warning]The `save-state` command is not supported: its state is for the post step of a JavaScript action, which is not run here",
		"::group::G", "##[group]G", "::echo::off", "##[endgroup]",
		`##[warning]::echo:: takes on or off, not "maybe"`, "",
	}, "\n"), log)
	require.Equal(t, map[string]string{"v": "1.2"}, w.StepOutputs())
	w.BeginStep("next")
	require.Nil(t, w.StepOutputs(), "outputs are per step")
}

func TestCommandWriterStopCommands(t *testing.T) {
	t.Parallel()
	log, w := run(t, runtime.CommandOptions{},
		"::add-mask::pwd1\n::stop-commands::tok123\n::error::not an annotation pwd1\n::add-mask::notmasked\nnotmasked\n::tok123::\n::warning::back\n::stop-commands::\n",
		"::stop-commands::t2\n", "::error::a new step resumes commands\n")
	require.Equal(t, "::error::not an annotation ***\n::add-mask::notmasked\nnotmasked\n##[warning]back\n"+
		"##[warning]::stop-commands:: needs a token: ::stop-commands::TOKEN, resumed by ::TOKEN::\n##[error]a new step resumes commands\n", log)
	anns, _ := w.Annotations()
	require.Len(t, anns, 2)
}

func TestCommandWriterLinesAcrossWrites(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	w := runtime.NewCommandWriter(&log, runtime.CommandOptions{})
	w.BeginStep("s")
	for _, b := range []byte("::add-mask::wxyz\nab wxyz\r\n::group::g\npartial") {
		_, err := w.Write([]byte{b})
		require.NoError(t, err)
	}
	require.Equal(t, "ab ***\r\n##[group]g\n", log.String(), "only whole lines are written")
	require.NoError(t, w.Flush())
	require.Equal(t, "ab ***\r\n##[group]g\npartial\n", log.String())
}

func TestCommandWriterLongLines(t *testing.T) {
	t.Parallel()
	long := "::error::" + strings.Repeat("x", 30)
	log, w := run(t, runtime.CommandOptions{MaxLineBytes: 16}, long+"\n::notice::short\n"+strings.Repeat("y", 16)+"\n")
	require.Equal(t, long+"\n##[notice]short\n"+strings.Repeat("y", 16)+"\n", log)
	anns, _ := w.Annotations()
	require.Equal(t, []cikit.Annotation{{Level: "notice", Message: "short", Step: "step 1"}}, anns, "a line past the limit is no command")
}

func TestCommandWriterConcurrent(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	w := runtime.NewCommandWriter(&log, runtime.CommandOptions{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				_, err := w.Write([]byte("::notice::n\n"))
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	anns, dropped := w.Annotations()
	require.Equal(t, cikit.MaxAnnotations, len(anns))
	require.Equal(t, 200-cikit.MaxAnnotations, dropped)
	require.Equal(t, 200, strings.Count(log.String(), "##[notice]n\n"))
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, fmt.Errorf("disk full")
	}
	f.n--
	return len(p), nil
}

func TestCommandWriterOutputError(t *testing.T) {
	t.Parallel()
	w := runtime.NewCommandWriter(&failWriter{n: 1}, runtime.CommandOptions{})
	_, err := w.Write([]byte("one\ntwo\n"))
	require.ErrorContains(t, err, "disk full")
	_, err = w.Write([]byte("three\n"))
	require.ErrorContains(t, err, "disk full")
	require.ErrorContains(t, w.Flush(), "disk full")
}

// FuzzCommandWriter feeds arbitrary output, in arbitrary pieces, through a
// CommandWriter, and arbitrary lines to ParseCommand.
//
// Invariant: neither panics; the log and the annotations do not depend on
// how the output is cut into writes; a value registered with ::add-mask:: (of
// at least mask.MinValueBytes once trimmed) never appears in the log after the line that registered it,
// unless stop-commands was on or the line was longer than the limit; the
// annotations never pass the limit; ParseCommand's message never holds
// the escapes it removes.
func FuzzCommandWriter(f *testing.F) {
	for _, tt := range commandLines {
		f.Add(tt.line+"\nmore\n", uint8(3))
	}
	f.Add("::add-mask::abc\nxabcx\n::stop-commands::t\nabc\n::t::\n", uint8(5))
	f.Fuzz(func(t *testing.T, out string, piece uint8) {
		const maxLine = 64
		c, ok := runtime.ParseCommand(out)
		if ok && c.Name == "" {
			t.Fatal("a command without a name")
		}
		var log strings.Builder
		w := runtime.NewCommandWriter(&log, runtime.CommandOptions{MaxLineBytes: maxLine, MaxAnnotations: 5})
		w.BeginStep("s")
		size := int(piece%16) + 1
		for p := out; p != ""; {
			n := min(size, len(p))
			if _, err := w.Write([]byte(p[:n])); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		anns, dropped := w.Annotations()
		if len(anns) > 5 {
			t.Fatalf("%d annotations", len(anns))
		}
		var whole strings.Builder
		w2 := runtime.NewCommandWriter(&whole, runtime.CommandOptions{MaxLineBytes: maxLine, MaxAnnotations: 5})
		w2.BeginStep("s")
		if _, err := w2.Write([]byte(out)); err != nil {
			t.Fatal(err)
		}
		if err := w2.Flush(); err != nil {
			t.Fatal(err)
		}
		anns2, dropped2 := w2.Annotations()
		if whole.String() != log.String() || !cmp.Equal(anns, anns2) || dropped != dropped2 {
			t.Fatalf("pieces of %d bytes give another log than one write:\n%q\n%q", size, log.String(), whole.String())
		}
		if strings.Contains(out, "stop-commands") || len(out) > maxLine {
			return
		}
		// With every line short and no stop-commands, no registered
		// mask shows after its registration.
		lines := strings.Split(out, "\n")
		var masks []string
		for _, l := range lines {
			if c, ok := runtime.ParseCommand(l); ok && c.Name == "add-mask" {
				masks = append(masks, c.Message)
			}
		}
		for _, m := range masks {
			if len(strings.TrimSpace(m)) < mask.MinValueBytes || strings.ContainsAny(m, "\r\n") || strings.Contains(runtime.MaskReplacement, m) {
				continue
			}
			// The log after the mask's registration holds it only as
			// a part of a longer mask replaced before it (overlaps).
			if strings.Contains(w.Mask(log.String()), m) {
				t.Fatalf("mask %q in log %q", m, log.String())
			}
		}
	})
}

// TestCommandWriterLineOfMaxBytes: a line of exactly MaxLineBytes is a
// line, a command too, also when its newline comes in the next write
// (found by FuzzCommandWriter).
func TestCommandWriterLineOfMaxBytes(t *testing.T) {
	t.Parallel()
	line := "::notice::" + strings.Repeat("n", 6) // 16 bytes
	for _, split := range []int{len(line), len(line) + 1, 5} {
		text := line + "\nafter\n"
		var log strings.Builder
		w := runtime.NewCommandWriter(&log, runtime.CommandOptions{MaxLineBytes: 16})
		w.BeginStep("s")
		_, _ = w.Write([]byte(text[:split]))
		_, _ = w.Write([]byte(text[split:]))
		require.NoError(t, w.Flush())
		require.Equal(t, "##[notice]nnnnnn\nafter\n", log.String(), "split at %d", split)
	}
}
