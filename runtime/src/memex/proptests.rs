//! Property tests of the scanner and the memex on random and mutated Org text.
