//! Disk faults end to end: a host killed during write-back, and files that
//! are not regular files in the memex and plugins folders of a running host.
