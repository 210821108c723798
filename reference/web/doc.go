// Package web is the reference platform's web UI: a single-page app of
// plain HTML, CSS and JavaScript modules, embedded in the binary and
// served by Go, that reads the platform's JSON API.
//
// It has three pages: the runs, newest first; a run, with its jobs drawn
// as a graph of their needs (the critical path highlighted), buttons to
// cancel and retry it, and the annotations its jobs' steps attached
// (with the file and line they name); and a job, with its state, why it
// waits, what its attempt reported and its log followed live. Every page
// updates itself while what it shows is unfinished.
//
// The log shows the markers the runner leaves for GitHub's workflow
// commands (see fleet/runtime's CommandWriter) as GitHub does, without
// the markers: the lines after "##[group]Title" are folded under Title,
// collapsed until it is clicked, up to "##[endgroup]" (not shown) or the
// next group; "##[error]", "##[warning]", "##[notice]" and "##[debug]"
// lines are highlighted by level. A link to a folded line unfolds its
// group.
//
// [New] returns the [UI], an http.Handler meant to be mounted at "/": it
// answers every GET of a page path with the app's index page and serves
// the app's files under /assets/. The API itself is served by another
// handler under [Config.APIPrefix]; requests for it that reach the UI are
// answered 404 in the API's error format.
//
// # Caching
//
// Asset URLs carry a version, a digest of all the assets, which the index
// page names: /assets/<version>/app.js. The current version is cached for
// a year as immutable; any other version, and the index page, must be
// revalidated (each has an ETag). Unknown assets are 404, and there are
// no directory listings.
//
// # Testing hooks
//
// Elements a browser test needs carry data-testid attributes (see package
// webtest, which reads them): "dag", "dag-node" (with data-job,
// data-state and data-critical), "dag-edge" (with data-from, data-to and
// data-critical), "run-state", "cancel", "retry", "error",
// "run-annotations" with its "run-annotation" items (with data-level,
// data-job, data-file and data-line), "log", "log-line" (with id "L<n>"
// and, for a line that had a marker, data-marker), "log-group" and the
// "log-fold" button of its title line; on a job's page "job-commit",
// "job-image" (the image it ran in and the digest it ran on),
// "job-outputs", "job-env-names" and "annotations" (whose items carry
// data-level) show what its attempt reported.
package web
