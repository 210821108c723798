package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/logs"
)

// logKey reads the log a request names: its run and job, which must
// exist, and ?attempt=, by default the job's current attempt; params are
// the query parameters the route takes. It answers the request and
// returns false when it cannot.
func (a *API) logKey(w http.ResponseWriter, r *http.Request, params ...string) (logs.Key, bool) {
	if a.hub == nil {
		writeError(w, http.StatusNotFound, "this platform keeps no logs")
		return logs.Key{}, false
	}
	if !pathIDs(w, r, "run", "job") {
		return logs.Key{}, false
	}
	q, ok := queryParams(w, r, params...)
	if !ok {
		return logs.Key{}, false
	}
	runID, jobID := r.PathValue("run"), r.PathValue("job")
	j, err := a.runs.JobGet(r.Context(), runID, jobID)
	if err != nil {
		a.fail(w, r, "reading the job", err)
		return logs.Key{}, false
	}
	key := logs.Key{RunID: runID, JobID: jobID, Attempt: j.Attempt}
	if v := q["attempt"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeFieldError(w, http.StatusBadRequest, "attempt", fmt.Sprintf("the attempt %q is not a number from 1", v))
			return logs.Key{}, false
		}
		if n > j.Attempt {
			writeError(w, http.StatusNotFound, fmt.Sprintf("job %q of run %q has no attempt %d; its attempt is %d", jobID, runID, n, j.Attempt))
			return logs.Key{}, false
		}
		key.Attempt = n
	}
	return key, true
}

// getLog answers the log of an attempt as plain text, as far as it
// exists: all of a finished log, the bytes written so far of a live one.
// Once the answer has begun, a failure to read the rest of a stored log
// cuts it short (and is logged).
func (a *API) getLog(w http.ResponseWriter, r *http.Request) {
	key, ok := a.logKey(w, r, "attempt")
	if !ok {
		return
	}
	ctx := r.Context()
	f, err := a.hub.Follow(ctx, key, 0)
	if errors.Is(err, cikit.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the log of attempt %d of job %q has not begun", key.Attempt, key.JobID))
		return
	}
	if err != nil {
		a.fail(w, r, "reading the log", err)
		return
	}
	defer f.Close()
	ev, more, err := f.TryNext(ctx)
	if err != nil && err != io.EOF {
		a.fail(w, r, "reading the log", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	for more {
		if _, err := w.Write(ev.Data); err != nil {
			return
		}
		ev, more, err = f.TryNext(ctx)
	}
	if err != nil && err != io.EOF && ctx.Err() == nil {
		a.log.LogAttrs(ctx, slog.LevelError, "api: reading the log failed", slog.String("log", key.String()), slog.String("error", err.Error()))
	}
}

// followLog streams the log of an attempt as Server-Sent Events, as
// logs.Handler's follow stream does (logs/README.md).
func (a *API) followLog(w http.ResponseWriter, r *http.Request) {
	key, ok := a.logKey(w, r, "attempt", "offset")
	if !ok {
		return
	}
	r = r.Clone(r.Context())
	q := r.URL.Query()
	q.Set("attempt", strconv.Itoa(key.Attempt))
	r.URL.RawQuery = q.Encode()
	r.SetPathValue("run_id", key.RunID)
	r.SetPathValue("job_id", key.JobID)
	a.follow.Follow(w, r)
}
