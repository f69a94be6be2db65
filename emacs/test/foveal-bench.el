;;; foveal-bench.el --- Speed of foveal.el -*- lexical-binding: t; -*-

;; SPDX-License-Identifier: MIT OR Apache-2.0

;;; Commentary:

;; Two measures of foveal.el, printed, never asserted (docs/benchmarks.md,
;; "The Emacs package"):
;;
;; - `foveal-bench-follow': what `foveal-follow-mode' costs per command
;;   in an Org buffer of the memex (2,000 headlines), with
;;   `benchmark-run'.  Needs no host:
;;
;;     emacs -Q --batch -L emacs -l emacs/test/foveal-bench.el \
;;       -f foveal-bench-follow
;;
;; - `foveal-bench-first-text': a message's first streamed character in
;;   the chat buffer, against the same message's first text line read
;;   raw from the socket (the host's own time): the difference is the
;;   package's.  Needs a host whose model answers at once; the ignored
;;   Rust test `emacs::emacs_package_speed' sets one up and runs both:
;;
;;     cargo test -p foveal --test it emacs_package_speed -- --ignored --nocapture

;;; Code:

(require 'foveal)
(require 'org)

(defun foveal-bench--quantile (times q)
  "The Q quantile of TIMES, in milliseconds."
  (let ((sorted (sort (copy-sequence times) #'<)))
    (* 1000 (nth (min (1- (length sorted))
                      (floor (* q (length sorted))))
                 sorted))))

(defun foveal-bench-follow ()
  "Print what `foveal--follow-check' costs per command."
  (let* ((dir (file-name-as-directory (make-temp-file "foveal-bench" t)))
         (file (expand-file-name "big.org" dir))
         (lines nil))
    (with-temp-file file
      (dotimes (i 2000)
        (insert (format "* Headline %d\n:PROPERTIES:\n:ID: h-%d\n:END:\n" i i))
        (dotimes (j 8)
          (insert (format "Body line %d of headline %d, some words to search over.\n" j i)))))
    (setq foveal--memex-roots (list dir)
          foveal--roots-generation (1+ foveal--roots-generation))
    (with-current-buffer (find-file-noselect file)
      (let ((count (count-lines (point-min) (point-max)))
            (runs 20000))
        (dotimes (_ runs)
          (push (save-excursion
                  (goto-char (point-min))
                  (forward-line (random count))
                  (point))
                lines))
        (let ((positions (vconcat lines))
              (i 0))
          ;; A command that moves to another line of the same entry: the
          ;; usual case (the comparison finds the same headline).
          (goto-char (aref positions 0))
          (foveal--follow-check)
          (let ((same (car (benchmark-run runs
                             (forward-line 0)
                             (foveal--follow-check)))))
            ;; Jumps anywhere in the file: a new headline each time (the
            ;; idle timer, armed once, stays armed: no idle time passes).
            (let ((jumps (car (benchmark-run runs
                                (goto-char (aref positions (setq i (% (1+ i) runs))))
                                (foveal--follow-check)))))
              (princ (format "follow-mode, per command (%d lines, 2000 headlines, %d runs):\n"
                             count runs))
              (princ (format "  same headline:  %.2f µs\n" (/ (* 1e6 same) runs)))
              (princ (format "  random jumps:   %.2f µs\n" (/ (* 1e6 jumps) runs))))))
        (when foveal--follow-timer
          (cancel-timer foveal--follow-timer)
          (setq foveal--follow-timer nil))
        (set-buffer-modified-p nil)
        (kill-buffer)))
    (delete-directory dir t)))

(defun foveal-bench--raw-turn (text)
  "Send TEXT on a raw connection; seconds to its first text line."
  (let* ((first nil)
         (start (float-time))
         (process (make-network-process
                   :name "foveal-bench-raw" :family 'local
                   :service (foveal-socket-path) :coding 'utf-8-unix
                   :noquery t
                   :filter (lambda (_process string)
                             (when (and (not first)
                                        (string-search "\"event\":\"text\"" string))
                               (setq first (float-time)))))))
    (process-send-string process (concat (json-serialize (list :cmd "send" :text text))
                                         "\n"))
    (while (process-live-p process)
      (accept-process-output process 0.01))
    (- first start)))

(defun foveal-bench--chat-turn (buffer text)
  "Send TEXT from the chat BUFFER; seconds to its first character shown."
  (with-current-buffer buffer
    (foveal--chat-send text)
    (while foveal--turn
      (accept-process-output nil 0.01))
    (- foveal--first-text-at foveal--sent-at)))

(defun foveal-bench-first-text ()
  "Print the first streamed character's time, raw and in the chat buffer.
The turns alternate, `FOVEAL_BENCH_TURNS' of each (50 by default)."
  (let* ((turns (string-to-number (or (getenv "FOVEAL_BENCH_TURNS") "50")))
         (foveal-start-host nil)
         (buffer (foveal-chat))
         (raw nil)
         (chat nil))
    (while (not foveal--connected)
      (accept-process-output nil 0.05))
    ;; One of each first: the host's first turn loads what it caches.
    (foveal-bench--raw-turn "warm up")
    (foveal-bench--chat-turn buffer "warm up")
    (dotimes (i turns)
      (push (foveal-bench--raw-turn (format "raw %d" i)) raw)
      (push (foveal-bench--chat-turn buffer (format "chat %d" i)) chat))
    (princ (format "first streamed character, %d turns each (ms): median, p90\n" turns))
    (princ (format "  raw socket (the host's own time): %.2f, %.2f\n"
                   (foveal-bench--quantile raw 0.5) (foveal-bench--quantile raw 0.9)))
    (princ (format "  chat buffer (foveal.el):          %.2f, %.2f\n"
                   (foveal-bench--quantile chat 0.5) (foveal-bench--quantile chat 0.9)))
    (princ (format "  the package's share (median):     %.2f\n"
                   (- (foveal-bench--quantile chat 0.5)
                      (foveal-bench--quantile raw 0.5))))
    ;; What the package does with each streamed line, alone: read it
    ;; from the connection's output, parse it, insert the text.
    (let ((process (make-pipe-process :name "foveal-bench-pipe" :noquery t))
          (runs 10000))
      (process-put process 'foveal-pending "")
      (process-put process 'foveal-handler
                   (lambda (reply)
                     (with-current-buffer buffer (foveal--turn-reply reply))))
      (with-current-buffer buffer
        (setq foveal--first-text-at (float-time)))
      (let ((time (car (benchmark-run runs
                         (foveal--filter
                          process "{\"event\":\"text\",\"text\":\"Hello, \"}\n")))))
        (princ (format "  one streamed line, read, parsed and inserted: %.1f µs\n"
                       (/ (* 1e6 time) runs))))
      (delete-process process))))

(provide 'foveal-bench)

;;; foveal-bench.el ends here
