// Package fleet is where jobs meet the runners that run them: the
// platform's side of the runner protocol (docs/runner-protocol.md), the
// Dispatcher that matches queued jobs with waiting runners by label, and
// the Manager that keeps pools of runners warm and sized to their demand.
//
// Its subpackages: the runner agent (fleet/agent), the local process
// executor and its sandbox (fleet/process), the Backend that runs runners
// in this process (fleet/local), backends served as plugins
// (fleet/plugin), the scaling decision (fleet/autoscale, with a simulator
// in fleet/autoscale/sim), and the Backend conformance suite
// (fleet/fleettest).
//
// # Pools
//
// A Backend provisions runners: machines, VMs, sandboxes or processes
// whose agent registers with the Server. A pool is a Backend, a label set
// and an autoscale.Policy. Each tick the Manager reconciles every pool
// with its Backend (Instances), counts its idle, busy and starting runners
// (from what the Server saw of them) and the queued jobs it can run (each
// counts towards the first pool whose labels include all of the job's),
// and carries out autoscale.Decide's plan: provision at once up to busy +
// queued + lag + the warm target, destroy idle runners slowly after a
// cooldown. A single-use runner ends after its job and the next tick
// replaces it. Manager.Why says why a job is not running yet: no runner
// matches its labels, its tenant is at its limit of running jobs
// (ServerConfig.TenantLimit), the pool is at its maximum, runners are
// starting (with an estimate), or the warm pool is empty.
//
// # The protocol
//
// A Server is an http.Handler serving /v1. Runners only ever call it:
// they register with a registration token and get a runner token, long
// poll for a job (GET /v1/jobs/claim), and for the job they are given send
// heartbeats, log chunks and the result, each with the short-lived job
// token the claim returned. A claim is a lease (package lease): the
// attempt number and the lease token fence every later call, so a runner
// that lost its lease — it was paused, partitioned, or presumed dead and
// replaced — is refused with 409 and must stop. With
// ServerConfig.Artifacts, the job's runner also reserves and completes
// uploads of its artifacts and caches, lists the artifacts it may read and
// looks cache keys up, through the attempt's artifacts.Broker, fenced the
// same way. With ServerConfig.Secrets, the claim of a job that needs
// secrets or ID tokens carries the job's OIDC ID token, which its runner
// presents, once, for exactly the secrets the stored spec names
// (secrets.Broker) and the ID tokens the spec asks for; the leases of
// dynamic secrets are renewed by the attempt's heartbeats and revoked when
// it ends.
//
// # The job's world
//
// A claim's answer carries, besides the spec, the job's cikit.JobContext:
// the run's context (the event that started it, recorded with the run),
// the attempt, the final states and outputs of the jobs it needs (read in
// one dag.Store.JobGetMany), and the source its runner fetches the commit
// from, minted per claim by ServerConfig.Source with a credential scoped
// to the job. A context larger than cikit.MaxJobContextBytes fails the
// job at the claim as a configuration error; a source that cannot be
// minted fails the attempt as an infrastructure one. The completion
// carries the attempt's report — outputs, annotations, the commit checked
// out, the checkout's duration, the names of its environment variables —
// each bounded, refused with 413 or 400 naming the field, and stored with
// the attempt (dag.JobResult). The job token names the run's repository:
// Server.AuthorizeFetch tells the platform's git server whether a token
// may fetch a repository, for as long as its attempt's lease holds.
//
// # Dispatch
//
// Server.Dispatch takes the results of the store's transitions and queues
// the jobs that became READY, offering them to the Dispatcher; a waiting
// runner whose labels include all of a job's runs_on labels is woken at
// once, without polling. A retried attempt is offered after a backoff.
// Completions through the Server dispatch what they make ready
// themselves; whoever else changes jobs (run creation, the reaper) passes
// its results to Dispatch or calls DispatchRun. DispatchJobs queues the
// READY jobs it is given in batches of one store call and offers the
// QUEUED ones again, such as a page of dag.Store.JobListWaiting in a
// sweep. Dispatch withdraws the waiting offers of attempts its results
// ended, so that the jobs of a cancelled run are not handed to runners
// only to be refused.
//
// # Batching
//
// Concurrent claims and completions are joined into batches, without
// timers: the first request that finds no batch of its kind in flight
// takes the ones waiting (up to 64) into one lease.Manager.ClaimMany or
// CompleteMany call and answers each; the others wait for their answer.
// A lone request goes at once. On PostgreSQL and Redis this makes claim
// and complete cycles several times faster under load (lease/README.md
// has the figures).
//
// # Tokens and revocation
//
// Runner and job tokens are HMAC-SHA256 signed claims; the first of
// ServerConfig.SigningKeys signs and all verify, so keys can be rotated.
// Registration tokens are compared in constant time. Registration records
// the runner in a RunnerStore (ServerConfig.Runners: MemoryRunnerStore or
// PostgresRunnerStore, one conformance suite in fleet/runnerstest), and
// every call a runner makes, with its runner token or a job token it was
// given, is checked against its record through a cache of
// ServerConfig.RunnerCheckTTL (5 s by default): Server.RunnerRevoke
// refuses the runner's calls with 401 "runner revoked" at once on the
// Server that revoked it and within that TTL on the others, and its job
// goes to another runner once its unrenewed lease is reaped. A token
// whose runner has no record is refused as unknown; the agent then
// registers again.
//
// # Policy
//
// A job's cikit.Admission, decided by the platform's policy, binds what
// the fleet hands it: only a runner whose every label its
// RunnerLabelsAllowed allows takes it (the Dispatcher, the claim and the
// Manager's pools all check it, and Manager.Why says when the policy
// keeps every matching runner from it); its ID tokens follow its capped
// permissions (cikit.EffectivePermissions); its cache scope is its
// CacheScope (artifacts.JobScopes). A job held by an approval gate waits
// MANUAL, and Manager.Why says for whom.
//
// # Stability
//
// The protocol's v1 paths and fields are stable: fields may be added,
// none removed. The Go API may still change.
package fleet
