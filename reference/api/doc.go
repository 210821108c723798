// Package api is the reference platform's HTTP API for people and the web
// UI: the runs, their jobs and logs, cancelling and retrying runs, the
// built-in store's secrets, and the health checks. Its routes, answers and errors are documented, with
// examples its tests execute, in docs/api.md.
//
// An API is an http.Handler over a dag.Store and, optionally, a logs.Hub,
// a fleet's answers to "why is this job waiting" and its dispatch. Who may
// call which route is the mounting server's business: the API does no
// authentication of its own, but for the secrets routes, which need one
// of Config.AdminTokens as a bearer token. The routes that approve and
// reject gated jobs (cikit.Gate) read who decides from the request's
// context (auth.FromContext), refuse a person the gate's reviewers do not
// name, and record the decision in Config.Approvals and Config.Audit.
//
//	a, err := api.New(api.Config{Runs: store, Logs: hub, Why: manager.Why, Dispatch: server.Dispatch})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/api/", a)
//	mux.Handle("/healthz", a)
//	mux.Handle("/readyz", a)
//	srv.RegisterOnShutdown(a.CloseFollowers)
package api
