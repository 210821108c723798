package secrets

// ScramVerifier exposes scramVerifier to the tests, which compare it with
// the server's.
var ScramVerifier = scramVerifier
