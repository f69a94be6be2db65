//! Untrusted input end to end: a 10 MB word in a message, a reply and a
//! headline; a server that streams far past the reply cap.
