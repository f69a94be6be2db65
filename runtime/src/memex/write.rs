//! Write-back: edits to memex files, atomic and byte-preserving.
