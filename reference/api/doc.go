// Package api is the reference platform's HTTP API for people and the web
// UI: the runs, their jobs and logs, cancelling and retrying runs, the
// built-in store's secrets, tokens, service accounts, roles, the audit
// log, and the health checks. Its routes, answers and errors are
// documented, with examples its tests execute, in docs/api.md.
//
// An API is an http.Handler over a dag.Store and, optionally, a logs.Hub,
// a fleet's answers to "why is this job waiting" and its dispatch. The
// routes that approve and reject gated jobs (cikit.Gate) need approve on
// the run's repository, refuse a person the gate's reviewers do not name,
// and record the decision in Config.Approvals and the audit log.
//
// # Who may call what
//
// Every route is registered with a Rule: the role it needs and where
// (the platform, the {org}/{repo} of its path, the repository of its
// {run}, the scope of a secret), or that it is open (the health checks)
// or needs only a credential. Config.Access (an *auth.Service) checks it
// before the handler runs and hands the handler the caller
// (auth.FromContext); a route with the zero Rule is refused, so New
// fails rather than serve it open. Routes lists every route with its
// rule; the package's authorization test walks it with every kind of
// caller. A rule with an Action writes each call, refusals included, to
// the audit log. A new route is one line of register (routes.go).
//
//	access, _ := auth.New(auth.Config{Store: auth.NewMemoryStore()})
//	token, _, _ := access.Bootstrap(ctx) // the first admin's token, shown once
//	a, err := api.New(api.Config{Runs: store, Logs: hub, Why: manager.Why, Dispatch: server.Dispatch, Access: access})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/api/", a)
//	mux.Handle("/healthz", a)
//	mux.Handle("/readyz", a)
//	mux.Handle("/auth/", access.Handler())
//	srv.RegisterOnShutdown(a.CloseFollowers)
package api
