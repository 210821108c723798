// Package ingest is where events enter the platform: webhooks from GitHub,
// GitLab and other senders are verified, normalized into one Event and
// handed to a Publisher, which makes them durable on the topic the rest
// of the platform consumes.
//
// # Receiving webhooks
//
// A Receiver is an http.Handler a platform mounts at the address its
// webhooks are sent to. It does three things per delivery, in order: it
// verifies the signature on the body exactly as received, normalizes the
// payload, and publishes the event, answering 202 only after Publish has
// returned. A provider is therefore told that a delivery was taken only
// when it is durable; when Publish fails the answer is 503 and the
// provider delivers it again. Deliveries that start no pipeline (a ping,
// a branch deletion, a closed pull request) are answered 200 with the
// reason, and are not published. The only state it keeps is a bounded
// memory of what it published, so that a verified redelivery is answered
// 202 without being published twice, and a delivery id seen with another
// body is refused 409 and logged; the consumer's deduplication is the
// guarantee, the memory spares it the work.
//
// # Verification
//
// Nothing is parsed before its signature is checked, and signatures and
// tokens are compared with the expected ones in constant time. A
// Receiver checks the headers before it reads the body (no signature, a
// wrong token or a stale timestamp costs no body) and computes the HMACs
// while the body arrives, so a large body is read once:
//
//   - GitHub: X-Hub-Signature-256, "sha256=" and the hex HMAC-SHA256 of
//     the body (GitHubVerifier). The SHA-1 X-Hub-Signature is not
//     accepted.
//   - GitLab: the X-Gitlab-Token secret token, compared through SHA-256
//     digests so that its length does not show; and, for webhooks with a
//     signing token, the Standard Webhooks signature (GitLabVerifier).
//   - Standard Webhooks (https://www.standardwebhooks.com): webhook-id,
//     webhook-timestamp and webhook-signature, an HMAC-SHA256 of
//     "id.timestamp.body" under a "whsec_" secret, with the timestamp
//     within a tolerance of the clock, five minutes by default
//     (StandardVerifier).
//
// Every verifier takes several secrets, any of which passes, so secrets
// can be rotated without refusing deliveries. Failures wrap
// ErrMissingSignature, ErrSignatureMismatch or
// ErrTimestampOutsideTolerance; a Receiver tells the sender only which,
// and logs the detail.
//
// A valid signature does not make a delivery new: GitHub and GitLab sign
// no timestamp, and a redelivery is signed like the first delivery.
// Deduplication by Event.DeliveryID happens downstream, where the
// delivery record is written.
//
// # Normalization
//
// NormalizeGitHub, NormalizeGitLab and NormalizeDispatch turn a verified
// Webhook into a Normalized: an Event, or an Ignored with the reason the
// delivery starts no pipeline. A payload that is not JSON or lacks what
// its event needs is an error, answered 400. Normalized events are
// checked before they leave: Org and Repo are paths of letters, digits,
// '.', '_' and '-'; RefName, BaseRef and DefaultBranch are valid git
// branch or tag names; SHAs are 40 or 64 lowercase hex digits. So keys
// and refs taken from an event are safe to use.
//
// Events from programs rather than from a forge, such as a release tool
// asking for the pipelines of a tag, are Standard Webhooks deliveries of
// type DispatchType; they become events of the Manual provider.
//
// # From the topic to runs
//
// A Consumer reads the topic as a member of a consumer group: records of
// one key (one ref) in order, other keys in parallel, offsets committed
// only up to the oldest record not yet done, failures retried and then
// dead-lettered with their origin. Its handler, Ingester.HandleRecord,
// turns each Event into pipeline runs: it skips a delivery already taken
// in, lets a push to a branch other than the default one wait and yield to
// a pull request of the same commit, reads every pipeline file at the
// event's commit through a vcs.Provider, compiles it with the event, and
// keeps those whose triggers match (GitLab's rules:exists globs are
// matched against the commit's files when the provider is a
// vcs.FileLister). A file that does not compile, for a reason other than
// having no job for the event, runs nothing and gets a failure commit
// status saying why (IngesterConfig.Statuses). The platform's policy is
// then asked about each run (IngesterConfig.Admit, with AdmitFacts: the
// changed files and whether the pipeline may have been edited): it may
// gate jobs or set their admission, refuse the event (ErrRefused: no
// run, a failure status) or fail for now (retried). RunStore.CreateRuns then
// writes the delivery's record and the runs in one transaction, so that
// each delivery (and each replay of its body under another id: the
// SemanticKey) makes its runs once, and events older than their ref's
// newest are dropped.
// ManualTrigger starts pipelines on request through the same path.
//
// # From runs to the platform
//
// A Relay publishes the outbox events the run store wrote to
// cikit.pipeline-events, and the jobs that became ready to the dispatch
// lanes cikit.dispatch.p0|p1|p2, marking them published only after the
// broker's ack; several relays share the work.
//
// # Stability
//
// Event is the value on the topic: its fields are only added, never
// renamed or repurposed. The verifiers, the normalizers and the
// Receiver's status codes are stable; the reasons of Ignored and the
// texts of errors are for people and may change.
package ingest
