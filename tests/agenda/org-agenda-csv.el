;;; org-agenda-csv.el --- Print Org's day/week agenda as TSV  -*- lexical-binding: t -*-

;; Usage (from the repository root):
;;
;;   emacs --batch -Q -l tests/agenda/org-agenda-csv.el TODAY SPAN FILE...
;;
;; TODAY is YYYY-MM-DD, SPAN a number of days.  Prints one line per
;; agenda entry, in agenda order, tab-separated:
;;
;;   DATE  TYPE  EXTRA  TIME  TODO  TITLE
;;
;; DATE   the agenda day the entry is listed under (YYYY-MM-DD), read
;;        from the `day' text property `org-agenda-list' puts on each
;;        day's block.  NOT the entry's `date' property: for an overdue
;;        deadline that is the deadline's own day, for a past-scheduled
;;        item the scheduled day, although both are listed under today.
;;        (`org-batch-agenda-csv's `date' column is that `date'
;;        property; its `agenda-day' column is the right one, but that
;;        command also turns commas in titles into semicolons.)
;; TYPE   the `type' text property: timestamp, block, deadline,
;;        upcoming-deadline, scheduled, past-scheduled (sexp for %%()
;;        entries).
;; EXTRA  the `extra' text property (the leader: "Deadline:",
;;        "In   3 d.:", "2 d. ago:", "Scheduled:", "Sched. 2x:",
;;        "(1/3):"), trimmed at both ends.  The untrimmed leaders are
;;        "Deadline:  ", "In %3d d.: ", "%2d d. ago: ", "Scheduled: ",
;;        "Sched.%2dx: ", "(%d/%d): " and "" (one-day range).
;; TIME   the `time' text property (what the %t prefix field shows),
;;        trimmed, with the time grid's "......" filler that Org appends
;;        to a lone start time removed: "9:00", "10:00-11:30", or empty.
;;        Org prints hours without a leading zero
;;        (`org-agenda-time-leading-zero' nil).
;; TODO   the TODO keyword (`todo-state' property), empty if none.
;; TITLE  the headline of the entry as in the file, without stars, TODO
;;        keyword, priority cookie, COMMENT and tags
;;        (`org-get-heading' t t t t, no text properties).  A timestamp
;;        written in the headline stays in the title.
;;
;; Lines of the agenda that are not entries (day headers, the time
;; grid and the "now" line) have no `org-hd-marker' and are skipped.
;;
;; "Today" is faked: `org-today' (which `org-agenda-list',
;; `org-agenda-today-p', `org-agenda-get-deadlines', -scheduled and
;; -timestamps all use; it is `time-to-days' of `time-since', i.e. the
;; C clock, so advising `current-time' alone would not do) is overridden
;; to return TODAY.  `current-time' and `calendar-current-date' are
;; overridden too, consistently, for any Lisp caller on the way (the
;; agenda code itself does not need them).  Only the "now" line of the
;; time grid (`format-time-string' "%H:%M" on the real clock) still
;; sees the real time, and it is not printed.
;;
;; Settings: only these are changed from Org's defaults
;;   org-agenda-files             the FILEs (absolute paths, in order)
;;   org-agenda-span              SPAN, passed also as SPAN argument
;;   org-agenda-start-on-weekday  nil (default 1 = Monday, would move
;;                                the start of a 7/14-day agenda)
;;   start day                    TODAY (START-DAY argument)
;;   org-agenda-sticky            nil (already the default)
;;
;; Org 9.5.5 defaults that matter (left untouched; see RULES.md):
;;   org-agenda-entry-types '(:deadline :scheduled :timestamp :sexp)
;;   org-deadline-warning-days 14        org-scheduled-delay-days 0
;;   org-deadline-past-days 10000        org-scheduled-past-days 10000
;;   org-agenda-skip-deadline-if-done nil
;;   org-agenda-skip-scheduled-if-done nil
;;   org-agenda-skip-timestamp-if-done nil
;;   org-agenda-skip-scheduled-if-deadline-is-shown nil
;;   org-agenda-skip-deadline-prewarning-if-scheduled nil
;;   org-agenda-skip-scheduled-delay-if-deadline nil
;;   org-agenda-skip-timestamp-if-deadline-is-shown nil
;;   org-agenda-skip-additional-timestamps-same-entry nil
;;   org-agenda-skip-archived-trees t    org-agenda-skip-comment-trees t
;;   org-agenda-show-future-repeats t    org-agenda-prefer-last-repeat nil
;;   org-agenda-include-inactive-timestamps nil
;;   org-agenda-include-diary nil        org-agenda-show-log nil
;;   org-agenda-show-all-dates t         org-extend-today-until 0
;;   org-agenda-search-headline-for-time t
;;   org-agenda-default-appointment-duration nil
;;   org-agenda-time-leading-zero nil
;;   org-agenda-time-grid '((daily today require-timed)
;;                          (800 1000 1200 1400 1600 1800 2000)
;;                          "......" "----------------")
;;   org-agenda-sorting-strategy (agenda habit-down time-up
;;                                       priority-down category-keep)
;;   org-agenda-sort-notime-is-late t
;;   org-agenda-deadline-leaders '("Deadline:  " "In %3d d.: " "%2d d. ago: ")
;;   org-agenda-scheduled-leaders '("Scheduled: " "Sched.%2dx: ")
;;   org-agenda-timerange-leaders '("" "(%d/%d): ")
;;   org-priority-highest ?A  org-priority-default ?B  org-priority-lowest ?C
;;   org-modules without org-habit (a :STYLE: habit entry is a plain entry)
;;   org-todo-keywords '((sequence "TODO" "DONE")) unless #+TODO: says otherwise

;;; Code:

(require 'org)
(require 'org-agenda)
(require 'calendar)

(defvar org-agenda-csv--today nil
  "Absolute day number (as `calendar-absolute-from-gregorian') of fake today.")

(defun org-agenda-csv--parse-date (s)
  "Parse YYYY-MM-DD S into a calendar date (MONTH DAY YEAR)."
  (unless (string-match "\\`\\([0-9]\\{4\\}\\)-\\([0-9]\\{2\\}\\)-\\([0-9]\\{2\\}\\)\\'" s)
    (error "TODAY must be YYYY-MM-DD, got %S" s))
  (list (string-to-number (match-string 2 s))
        (string-to-number (match-string 3 s))
        (string-to-number (match-string 1 s))))

(defun org-agenda-csv--ymd (absolute)
  "Format ABSOLUTE day number as YYYY-MM-DD."
  (let ((d (calendar-gregorian-from-absolute absolute)))
    (format "%04d-%02d-%02d" (nth 2 d) (nth 0 d) (nth 1 d))))

(defun org-agenda-csv--clean (s)
  "Trim S, drop text properties, and replace tabs/newlines by spaces."
  (replace-regexp-in-string
   "[\t\n\r]" " " (org-trim (substring-no-properties (or s ""))) t t))

(defun org-agenda-csv--time (time)
  "The displayed TIME field without the time grid's trailing filler."
  (let ((s (org-trim (substring-no-properties (or time ""))))
        (filler (nth 2 org-agenda-time-grid)))
    (when (and (stringp filler) (> (length filler) 0)
               (string-suffix-p filler s))
      (setq s (org-trim (substring s 0 (- (length s) (length filler))))))
    s))

(defun org-agenda-csv--entries ()
  "Return the entries of the current agenda buffer as TSV lines."
  (let (lines)
    (save-excursion
      (goto-char (point-min))
      (while (not (eobp))
        (let* ((bol (line-beginning-position))
               (hd (get-text-property bol 'org-hd-marker))
               (day (get-text-property bol 'day)))
          (when hd
            (unless (integerp day)
              (error "Agenda line without a `day' property: %S"
                     (buffer-substring-no-properties bol (line-end-position))))
            (push
             (mapconcat
              #'identity
              (list (org-agenda-csv--ymd day)
                    (org-agenda-csv--clean (get-text-property bol 'type))
                    (org-agenda-csv--clean (get-text-property bol 'extra))
                    (org-agenda-csv--time (get-text-property bol 'time))
                    (org-agenda-csv--clean (get-text-property bol 'todo-state))
                    (org-agenda-csv--clean
                     (org-with-point-at hd (org-get-heading t t t t))))
              "\t")
             lines)))
        (forward-line 1)))
    (nreverse lines)))

(defun org-agenda-csv-main (args)
  "Run the agenda for ARGS = (TODAY SPAN FILE...) and print it."
  (unless (>= (length args) 3)
    (error "Usage: emacs --batch -Q -l org-agenda-csv.el TODAY SPAN FILE..."))
  (let* ((date (org-agenda-csv--parse-date (nth 0 args)))
         (span (string-to-number (nth 1 args)))
         (files (mapcar #'expand-file-name (nthcdr 2 args)))
         (today (calendar-absolute-from-gregorian date))
         (noon (encode-time (list 0 0 12 (nth 1 date) (nth 0 date) (nth 2 date)
                                  nil -1 nil))))
    (unless (> span 0) (error "SPAN must be a positive number, got %S" (nth 1 args)))
    (dolist (f files)
      (unless (file-readable-p f) (error "No such file: %s" f)))
    (setq org-agenda-csv--today today)
    (advice-add 'org-today :override (lambda () org-agenda-csv--today)
                '((name . org-agenda-csv)))
    (advice-add 'calendar-current-date :override
                (lambda (&optional offset)
                  (calendar-gregorian-from-absolute
                   (+ org-agenda-csv--today (or offset 0))))
                '((name . org-agenda-csv)))
    (advice-add 'current-time :override (lambda () noon)
                '((name . org-agenda-csv)))
    (setq org-agenda-files files
          org-agenda-span span
          org-agenda-start-on-weekday nil
          org-agenda-start-day nil
          org-agenda-sticky nil)
    (org-agenda-list nil today span)
    (with-current-buffer org-agenda-buffer-name
      (dolist (line (org-agenda-csv--entries))
        (princ line)
        (princ "\n")))))

(org-agenda-csv-main command-line-args-left)
;; The arguments were ours: don't let Emacs visit them as files.
(setq command-line-args-left nil)

;;; org-agenda-csv.el ends here
