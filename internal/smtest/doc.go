// Package smtest starts an in-process AWS Secrets Manager server for a
// test: the JSON 1.1 protocol the SDK speaks (POST /, X-Amz-Target
// secretsmanager.GetSecretValue or secretsmanager.BatchGetSecretValue,
// Content-Type application/x-amz-json-1.1), so tests run the real
// aws-sdk-go-v2 client against secrets of their own.
//
// # Use
//
//	srv := smtest.New(t)
//	srv.Put("cikit/repo/acme/api/TOKEN", "value")
//	client := srv.Client() // or secretsmanager.New with BaseEndpoint srv.URL()
//
// # Guarantees
//
//   - Every call to [New] starts a new server on a free loopback port; it
//     is closed when the test ends. [Server.HTTPClient]'s connections are
//     closed with it.
//   - A request must carry a SigV4 Authorization header (the signature is
//     not checked), the JSON 1.1 content type and a known target; else it
//     is answered with the error AWS gives (MissingAuthenticationToken,
//     IncompleteSignature, UnknownOperation).
//   - Errors are AWS's: status 400 and {"__type": "ResourceNotFoundException",
//     "message": …}. BatchGetSecretValue takes a SecretIdList of 1 to 20
//     ids (Filters are refused), and lists the ids it cannot give in
//     Errors.
//   - [Server.Refuse] makes an operation answer AccessDeniedException, as
//     AWS does for a role whose policy lacks it; [Server.PutError] makes
//     one secret answer an error; [Server.Stall] makes an operation
//     answer nothing until cancelled; [Server.Calls] counts requests.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package smtest
