#!/bin/sh
# Regenerate tests/agenda/expected/*.tsv from the corpus with Emacs.
# Run from anywhere; needs GNU Emacs (28.2 with its bundled Org 9.5.5
# produced the committed files).  Files are passed in C-locale name
# order: habits.org, personal.org, work.org (the order matters for ties).
set -eu
cd "$(dirname "$0")/../.."
files=$(LC_ALL=C ls tests/agenda/corpus/*.org)
for case in 2024-01-15:7 2024-01-01:1 2024-02-01:14 2024-02-29:3 2024-01-20:10; do
  today=${case%:*} span=${case#*:}
  # shellcheck disable=SC2086
  emacs --batch -Q -l tests/agenda/org-agenda-csv.el "$today" "$span" $files \
    >"tests/agenda/expected/${today}_${span}.tsv"
done
