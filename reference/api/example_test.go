package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/auth"
)

// An API over a memory store: a run of two jobs, read as the web UI
// reads it.
func Example() {
	now := func() time.Time { return time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC) }
	store := dag.NewMemoryStore(dag.MemoryConfig{Now: now, NewID: func() string { return "run-1" }})
	step := []cikit.Step{{Run: "make"}}
	_, err := store.RunCreate(context.Background(), &dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "main", SHA: "4f2a9c1",
		Jobs: []*cikit.JobSpec{{ID: "build", Steps: step}, {ID: "test", Needs: []string{"build"}, Steps: step}}})
	if err != nil {
		panic(err)
	}
	// Who may do what: an auth.Service, here on a memory store, whose
	// first admin's token Bootstrap returns.
	access, err := auth.New(auth.Config{Store: auth.NewMemoryStore(), Now: now})
	if err != nil {
		panic(err)
	}
	token, _, err := access.Bootstrap(context.Background())
	if err != nil {
		panic(err)
	}
	a, err := api.New(api.Config{Runs: store, Access: access, Now: now})
	if err != nil {
		panic(err)
	}
	as := func(req *http.Request) *http.Request {
		req.Header.Set("Authorization", "Bearer "+token)
		return req
	}

	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, as(httptest.NewRequest("GET", "/api/v1/runs/run-1", nil)))
	var run api.RunDetail
	if err := json.Unmarshal(rec.Body.Bytes(), &run); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, run.ID, run.Branch, run.State)
	for _, j := range run.Jobs {
		fmt.Println(j.ID, j.State, j.WaitingOn)
	}

	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, as(httptest.NewRequest("POST", "/api/v1/runs/run-1/retry", nil)))
	fmt.Print(rec.Code, " ", rec.Body)
	// Output:
	// 200 run-1 main pending
	// build ready []
	// test pending [build]
	// 409 {"error":"invalid state transition: the run has not finished"}
}
