package artifacts_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
)

// Sizes of the download tests: one read's worth, and enough for the
// Sender to hash on a goroutine of its own while it reads.
var downloadSizes = []struct {
	name string
	size int
}{
	{"small", 3000},
	{"pipelined", 5<<20 + 17},
}

// bodyServer serves body at every path with no Content-Length (chunked),
// so that only the Sender's own count can see a short or long body.
func bodyServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSenderDownloadRefusesOtherBodies(t *testing.T) {
	t.Parallel()
	for _, sz := range downloadSizes {
		data, sum := blob(3, sz.size)
		flip := func(i int) []byte {
			b := bytes.Clone(data)
			b[i] ^= 1
			return b
		}
		for _, tc := range []struct {
			name string
			body []byte
			want string // "" is success
		}{
			{"same", data, ""},
			{"first byte differs", flip(0), "SHA-256 is "},
			{"middle byte differs", flip(len(data) / 2), "SHA-256 is "},
			{"last byte differs", flip(len(data) - 1), "SHA-256 is "},
			{"short by one", data[:len(data)-1], fmt.Sprintf("sent %d bytes, expected %d", len(data)-1, len(data))},
			{"long by one", append(bytes.Clone(data), 0), fmt.Sprintf("sent %d bytes, expected %d", len(data)+1, len(data))},
			{"empty", nil, fmt.Sprintf("sent 0 bytes, expected %d", len(data))},
		} {
			t.Run(sz.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := bodyServer(t, tc.body)
				sender := &artifacts.Sender{HTTP: srv.Client()}
				var out bytes.Buffer
				err := sender.Download(t.Context(), artifacts.Request{URL: srv.URL + "/a"}, int64(len(data)), sum, &out)
				if tc.want == "" {
					require.NoError(t, err)
					require.True(t, bytes.Equal(data, out.Bytes()), "the body arrives whole and in order")
					return
				}
				require.ErrorIs(t, err, artifacts.ErrRefused)
				require.ErrorContains(t, err, tc.want)
			})
		}
	}
}

// failingWriter takes limit bytes, then fails.
type failingWriter struct{ limit int }

var errWriterFull = errors.New("the disk is full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n := f.limit
		f.limit = 0
		return n, errWriterFull
	}
	f.limit -= len(p)
	return len(p), nil
}

func TestSenderDownloadWriterFails(t *testing.T) {
	t.Parallel()
	for _, sz := range downloadSizes {
		t.Run(sz.name, func(t *testing.T) {
			t.Parallel()
			data, sum := blob(4, sz.size)
			srv := bodyServer(t, data)
			sender := &artifacts.Sender{HTTP: srv.Client()}
			err := sender.Download(t.Context(), artifacts.Request{URL: srv.URL + "/a"}, int64(len(data)), sum, &failingWriter{limit: sz.size / 2})
			require.ErrorIs(t, err, errWriterFull)
			require.NotErrorIs(t, err, artifacts.ErrRefused)
		})
	}
}

func TestSenderDownloadBodyBreaks(t *testing.T) {
	t.Parallel()
	for _, sz := range downloadSizes {
		t.Run(sz.name, func(t *testing.T) {
			t.Parallel()
			data, sum := blob(5, sz.size)
			half := len(data) / 2
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(data)))
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(data[:half])
				w.(http.Flusher).Flush()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
			}))
			t.Cleanup(srv.Close)
			sender := &artifacts.Sender{HTTP: srv.Client()}
			err := sender.Download(t.Context(), artifacts.Request{URL: srv.URL + "/a"}, int64(len(data)), sum, io.Discard)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.ErrorContains(t, err, fmt.Sprintf("after %d bytes", half))
		})
	}
}
