// Package store is the one seam between electd's commands (and the demo
// and the benchmarks) and the store backends under elector/.
//
// Open finds the backend of a --store URL's scheme, which parses the rest
// of the URL itself (backend.Backend.Parse: etcd://h1:2379,h2:2379,
// redis://[user@]host:6379[/db], … — URLHelp lists them); takes the
// password from one of its three places (the URL, $ELECTD_STORE_PASSWORD
// or --store-password-file, given as plain Options) and the backend's own
// secrets from theirs (SecretFlags); builds the TLS configuration from
// electd's TLS flags for a TLS scheme; refuses, naming the flag, whatever
// the backend does not take; and dials. NewElector then makes candidates
// on that connection. Each backend is one line in backends.go: its
// package exports a backend.Backend and knows nothing of flags or this
// package; the --store help, the flags of the backends' secrets and the
// errors that list schemes are made from that list (registry.go).
//
// Guarantees:
//   - Everything in Options is checked before any request; a refusal is an
//     *elector.ConfigError whose Field names the flag.
//   - A store that answers and refuses electd's certificate or credentials
//     is found by one request in Open and reported as a *ConfigError with
//     what to fix; a store that does not answer is not an error (it is
//     logged once, and campaigns retry).
//   - The password never appears in an error, a log record (Open's logger
//     and every candidate's are scrubbed) or Redacted.
//
// Not guaranteed: that the store keeps answering after Open; that the
// permissions it granted at Open suffice for every later request.
package store
