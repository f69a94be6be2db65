;;; foveal-test.el --- Tests of foveal.el against a real host -*- lexical-binding: t; -*-

;; SPDX-License-Identifier: MIT OR Apache-2.0

;;; Commentary:

;; ERT tests of foveal.el.  Run them all with
;;
;;   emacs -Q --batch -L emacs -l emacs/test/foveal-test.el \
;;     -f ert-run-tests-batch-and-exit
;;
;; Alone, only the package's own checks run (it byte-compiles without a
;; warning, it passes checkdoc).  The others talk to a real `foveal run
;; --no-repl' on a temporary memex and a scripted model server: the
;; Rust test runtime/tests/it/emacs.rs sets them up and runs this file
;; once per scenario, telling it through the environment:
;;
;; FOVEAL_TEST_SCENARIO    chat, memex or reconnect (which tests run)
;; FOVEAL_TEST_EXECUTABLE  the foveal binary
;; FOVEAL_TEST_DIR         the test's folder (the memex is memex/ there)
;; FOVEAL_TEST_RUN_ARGS    the flags a host is started with
;; FOVEAL_TEST_VERSION     the host's version
;;
;; and FOVEAL_SOCKET, FOVEAL_DATA_DIR and the model server's address,
;; which the host, the package and `foveal' read alike.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'checkdoc)
(require 'foveal)

(defconst foveal-test--source
  (expand-file-name "../foveal.el"
                    (file-name-directory (or load-file-name buffer-file-name)))
  "The package's source file.")

(defun foveal-test--scenario-p (name)
  "Whether the Rust test runs this file for scenario NAME."
  (equal (getenv "FOVEAL_TEST_SCENARIO") name))

(defun foveal-test--dir (&rest names)
  "The test's folder, or the file NAMES name under it."
  (let ((dir (file-name-as-directory (getenv "FOVEAL_TEST_DIR"))))
    (if names (expand-file-name (string-join names "/") dir) dir)))

(defun foveal-test--setup ()
  "Point the package at the test's host."
  (setq foveal-executable (getenv "FOVEAL_TEST_EXECUTABLE")
        foveal-run-arguments (split-string (or (getenv "FOVEAL_TEST_RUN_ARGS") ""))
        foveal-host-directory (foveal-test--dir)
        foveal-reconnect-max 0.5))

(defun foveal-test--reset ()
  "Leave no buffer, connection, timer or mode behind."
  (dolist (name '("*foveal*" "*foveal-window*" "*foveal-context*"
                  "*foveal-status*"))
    (when (get-buffer name)
      (kill-buffer name)))
  (foveal-follow-mode -1)
  (foveal-gauge-mode -1)
  (when foveal--reconnect-timer
    (cancel-timer foveal--reconnect-timer))
  (foveal--close foveal--link)
  (setq foveal--link nil foveal--connected nil foveal--lost nil
        foveal--reconnect-timer nil foveal--reconnect-wait 0.1
        foveal--focus nil foveal--focus-title nil foveal--usage nil))

(defun foveal-test--wait (what predicate &optional seconds)
  "Wait until PREDICATE holds, at most SECONDS (20); fail naming WHAT."
  (let ((deadline (+ (float-time) (or seconds 20))))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or (funcall predicate)
        (ert-fail (list (format "timed out waiting for %s" what)
                        (and (get-buffer "*foveal*")
                             (with-current-buffer "*foveal*"
                               (buffer-substring-no-properties (point-min) (point-max))))
                        (list :connected foveal--connected :lost foveal--lost))))))

(defun foveal-test--foveal (&rest args)
  "Run the foveal binary with ARGS; its stdout, read as JSON."
  (with-temp-buffer
    (let ((status (apply #'call-process (getenv "FOVEAL_TEST_EXECUTABLE")
                         nil (list t nil) nil args)))
      (unless (eql status 0)
        (ert-fail (list "foveal failed" args status (buffer-string))))
      (goto-char (point-min))
      (json-parse-buffer :object-type 'plist :null-object nil
                         :false-object :false :array-type 'list))))

(defun foveal-test--status ()
  "The host's status, as `foveal status --json' prints it."
  (foveal-test--foveal "status" "--json"))

(defun foveal-test--wait-focus (expected)
  "Wait until `foveal status --json' names the focus EXPECTED (a predicate)."
  (let (status)
    (foveal-test--wait (format "the focus %s" expected)
                       (lambda ()
                         (setq status (foveal-test--status))
                         (funcall expected (plist-get status :focus))))
    status))

(defun foveal-test--visit (name)
  "A buffer visiting NAME in the test's memex, point at the top."
  (let ((buffer (find-file-noselect (foveal-test--dir "memex" name))))
    (with-current-buffer buffer (goto-char (point-min)))
    buffer))

(defun foveal-test--goto-line (line)
  "Move point to the start of LINE."
  (goto-char (point-min))
  (forward-line (1- line)))

;;;; The package itself

(ert-deftest foveal-test-package-byte-compiles-without-warnings ()
  (skip-unless (member (getenv "FOVEAL_TEST_SCENARIO") '(nil "" "package")))
  ;; A copy, compiled apart: no .elc is left beside the source (it would
  ;; be loaded instead of a newer .el).
  (let* ((dir (make-temp-file "foveal-compile" t))
         (copy (expand-file-name "foveal.el" dir)))
    (unwind-protect
        (progn
          (copy-file foveal-test--source copy)
          (with-temp-buffer
            (let ((status (call-process
                           (expand-file-name invocation-name invocation-directory)
                           nil t nil "-Q" "--batch" "-L" dir
                           "--eval" "(setq byte-compile-error-on-warn t)"
                           "-f" "batch-byte-compile" copy)))
              (should (equal (list status (buffer-string)) '(0 ""))))))
      (delete-directory dir t))))

(ert-deftest foveal-test-package-passes-checkdoc ()
  (skip-unless (member (getenv "FOVEAL_TEST_SCENARIO") '(nil "" "package")))
  (let ((warnings nil))
    ;; checkdoc says each problem with `warn' (which calls
    ;; `display-warning', maybe directly when compiled natively).
    (cl-letf (((symbol-function 'warn)
               (lambda (format &rest args) (push (apply #'format format args) warnings)))
              ((symbol-function 'display-warning)
               (lambda (_type message &rest _) (push message warnings))))
      (checkdoc-file foveal-test--source))
    (should (equal warnings nil))))

(ert-deftest foveal-test-the-socket-is-found-as-the-host-finds-it ()
  (skip-unless (member (getenv "FOVEAL_TEST_SCENARIO") '(nil "" "package")))
  (let ((process-environment (copy-sequence process-environment))
        (foveal-socket nil))
    (setenv "FOVEAL_SOCKET" "/s/control.sock")
    (should (equal (foveal-socket-path) "/s/control.sock"))
    (setenv "FOVEAL_SOCKET" nil)
    (setenv "XDG_RUNTIME_DIR" "/run/user/7")
    (should (equal (foveal-socket-path) "/run/user/7/foveal/control.sock"))
    (setenv "XDG_RUNTIME_DIR" "")
    (setenv "FOVEAL_DATA_DIR" "/d")
    (should (equal (foveal-socket-path) "/d/run/control.sock"))
    (setenv "FOVEAL_DATA_DIR" nil)
    (setenv "XDG_DATA_HOME" "/x")
    (should (equal (foveal-socket-path) "/x/foveal/run/control.sock"))
    (let ((foveal-socket "/set/here.sock"))
      (should (equal (foveal-socket-path) "/set/here.sock")))))

(ert-deftest foveal-test-the-language-comes-from-the-major-mode ()
  (skip-unless (member (getenv "FOVEAL_TEST_SCENARIO") '(nil "" "package")))
  (with-temp-buffer
    (python-mode)
    (should (equal (foveal--language) "python"))
    (emacs-lisp-mode)
    (should (equal (foveal--language) "elisp"))
    ;; A mode derived from a listed one takes its language.
    (lisp-interaction-mode)
    (should (equal (foveal--language) "elisp"))
    (fundamental-mode)
    (should (null (foveal--language)))))

;;;; The chat (scenario chat)

(ert-deftest foveal-test-chat-streams-folds-tools-cancels-and-takes-a-region ()
  "A streamed round trip with a tool call, a cancelled turn, `foveal-send'.
The model's script: a tool call, the reply in three pieces, a reply
that trickles until cancelled, a last reply."
  (skip-unless (foveal-test--scenario-p "chat"))
  (foveal-test--setup)
  (unwind-protect
      (let ((buffer (foveal-chat)))
        (foveal-test--wait "the handshake" (lambda () foveal--connected))
        (with-current-buffer buffer
          (should (string-prefix-p
                   (format "foveal %s │ scripted │ focus: - │ Context"
                           (getenv "FOVEAL_TEST_VERSION"))
                   (foveal--header-line)))
          ;; RET sends what follows the prompt.
          (goto-char (point-max))
          (insert "Which projects are there?")
          (foveal-chat-send-input)
          (should (string-search "You: Which projects are there?" (buffer-string)))
          (should (equal (buffer-substring-no-properties foveal--in (point-max)) ""))
          (foveal-test--wait "the reply" (lambda () (null foveal--turn)))
          (should (string-search "Found the Launch project." (buffer-string)))
          (should (= foveal--text-pieces 3))
          ;; The tool call: one line, its result folded away.
          (goto-char (point-min))
          (should (search-forward "▸ tool query_memex: ok" nil t))
          (let* ((button (button-at (match-beginning 0)))
                 (result (button-get button 'foveal-result))
                 (line (string-trim (car (split-string result "\n" t)))))
            (should (> (length line) 0))
            (should-not (string-search line (buffer-string)))
            (push-button (button-start button))
            (should (string-search line (buffer-string)))
            (should (string-search "▾ tool query_memex: ok" (buffer-string)))
            (push-button (button-start button))
            (should-not (string-search line (buffer-string))))
          ;; The gauge, from the pushed `cycle_finished'.
          (foveal-test--wait "the gauge" (lambda () foveal--usage))
          (should (string-match-p "│ Context [0-9]+% *\\'" (foveal--header-line)))
          ;; As the header line shows it: the % is not a %-construct.
          (should (string-match-p "Context [0-9]+%%"
                                  (foveal--mode-line-text (foveal--header-line))))
          ;; C-c C-c cancels the turn in flight; what came is kept.
          (goto-char (point-max))
          (insert "Take your time")
          (foveal-chat-send-input)
          (foveal-test--wait "the partial reply"
                             (lambda () (string-search "Working on it" (buffer-string))))
          (should (string-match-p "working…" (foveal--header-line)))
          (should (eq (key-binding (kbd "C-c C-c")) #'foveal-cancel))
          (should (foveal-cancel))
          (foveal-test--wait "the cancelled turn's end" (lambda () (null foveal--turn)))
          (should (string-search "Working on it\n[cancelled]" (buffer-string))))
        ;; `foveal-send': the region, to the same conversation.
        (with-temp-buffer
          (insert "Sent from a region")
          (transient-mark-mode 1)
          (push-mark (point-min) t t)
          (goto-char (point-max))
          (call-interactively #'foveal-send))
        (with-current-buffer buffer
          (foveal-test--wait "the region's reply" (lambda () (null foveal--turn)))
          (should (string-search "You: Sent from a region\nThe region arrived."
                                 (buffer-string)))))
    (foveal-test--reset)))

;;;; The focus, the window and the context (scenario memex)

(ert-deftest foveal-test-focus-here-takes-a-headline-with-and-without-an-id ()
  (skip-unless (foveal-test--scenario-p "memex"))
  (foveal-test--setup)
  (unwind-protect
      (progn
        (foveal-gauge-mode 1)
        (foveal-test--wait "the handshake" (lambda () foveal--connected))
        (should (equal (foveal--lighter) " Context –"))
        ;; Line 9 is in the properties of `** TODO Write docs' (:ID: docs).
        (with-current-buffer (foveal-test--visit "work.org")
          (foveal-test--goto-line 9)
          (foveal-focus-here))
        (should (equal (plist-get (foveal-test--wait-focus
                                   (lambda (f) (equal f "docs")))
                                  :focus_title)
                       "Write docs"))
        ;; The pushed `focus' event reached the subscription too.
        (foveal-test--wait "the pushed focus"
                           (lambda () (equal foveal--focus-title "Write docs")))
        ;; `** Draft a plan' has no :ID:: the host derives one.
        (with-current-buffer (foveal-test--visit "notes.org")
          (foveal-test--goto-line 4)
          (foveal-focus-here))
        (let ((status (foveal-test--wait-focus
                       (lambda (f) (and f (string-prefix-p "org-" f))))))
          (should (equal (plist-get status :focus_title) "Draft a plan")))
        ;; A private headline is refused as a line above every headline.
        (let ((answers nil)
              (work (foveal-test--dir "memex" "work.org")))
          (dolist (line '(12 1))
            (foveal--focus-request work line (lambda (reply) (push reply answers))))
          (foveal-test--wait "two answers" (lambda () (= (length answers) 2)))
          (should (equal (mapcar (lambda (r) (plist-get r :event)) answers)
                         '("error" "error")))
          (should (equal (replace-regexp-in-string
                          ":1 " ":N " (plist-get (nth 0 answers) :message))
                         (replace-regexp-in-string
                          ":12 " ":N " (plist-get (nth 1 answers) :message)))))
        (should (string-prefix-p "org-" (plist-get (foveal-test--status) :focus))))
    (foveal-test--reset)))

(ert-deftest foveal-test-follow-mode-moves-the-focus-with-point ()
  (skip-unless (foveal-test--scenario-p "memex"))
  (foveal-test--setup)
  (unwind-protect
      (progn
        (foveal-follow-mode 1)
        (foveal-test--wait "the handshake" (lambda () foveal--connected))
        (should (equal foveal--memex-roots
                       (list (file-name-as-directory
                              (file-truename (foveal-test--dir "memex"))))))
        (with-current-buffer (foveal-test--visit "work.org")
          (should (foveal--follow-here-p))
          ;; Line 6: `Ship it.', the body of `* Launch' (:ID: launch).
          (foveal-test--goto-line 6)
          (run-hooks 'post-command-hook)
          (should foveal--follow-timer)
          ;; Idle time does not pass in batch: the timer's work, now.
          (cancel-timer foveal--follow-timer)
          (foveal--follow-fire)
          (foveal-test--wait-focus (lambda (f) (equal f "launch")))
          ;; Moving within the same headline arms nothing.
          (foveal-test--goto-line 5)
          (run-hooks 'post-command-hook)
          (should-not foveal--follow-timer)
          ;; The private headline: refused, the focus stays.
          (foveal-test--goto-line 15)
          (run-hooks 'post-command-hook)
          (cancel-timer foveal--follow-timer)
          (foveal--follow-fire)
          (foveal-test--wait "the refusal" (lambda () (not foveal--follow-flight)))
          (should (equal (plist-get (foveal-test--status) :focus) "launch"))
          ;; `** TODO Write docs'.
          (foveal-test--goto-line 8)
          (run-hooks 'post-command-hook)
          (cancel-timer foveal--follow-timer)
          (foveal--follow-fire)
          (foveal-test--wait-focus (lambda (f) (equal f "docs"))))
        ;; A buffer outside the memex is not followed.
        (with-temp-buffer
          (setq buffer-file-name (expand-file-name "elsewhere.org" temporary-file-directory))
          (org-mode)
          (should-not (foveal--follow-here-p))))
    (foveal-test--reset)))

(defconst foveal-test--python "import math\n\ndef area(r):\n    return math.pi * r * r\n"
  "The Python file a region is attached from.")

(ert-deftest foveal-test-window-takes-a-region-a-buffer-an-error-and-the-list-removes ()
  (skip-unless (foveal-test--scenario-p "memex"))
  (foveal-test--setup)
  (let ((py (foveal-test--dir "calc.py")))
    (unwind-protect
        (progn
          (with-temp-file py (insert foveal-test--python))
          (foveal--window (list :op "clear"))
          ;; Lines 3-4 of a Python file: the region ends at the start of
          ;; line 5, which it does not hold.
          (with-current-buffer (find-file-noselect py)
            (should (eq major-mode 'python-mode))
            (foveal-window-add-region (progn (foveal-test--goto-line 3) (point))
                                      (point-max)))
          (let* ((items (plist-get (foveal-test--foveal "window" "list" "--json") :items))
                 (item (car items))
                 (metadata (plist-get item :metadata)))
            (should (= (length items) 1))
            (should (equal (plist-get item :type) "code"))
            (should (equal (plist-get item :content)
                           "def area(r):\n    return math.pi * r * r\n"))
            (should (equal (plist-get metadata :start_line) 3))
            (should (equal (plist-get metadata :end_line) 4))
            (should (equal (plist-get metadata :language) "python"))
            (should (string-suffix-p "calc.py" (plist-get metadata :filename))))
          ;; A buffer without a file goes as text; a compilation error
          ;; with its location.
          (with-temp-buffer
            (insert "The parser must accept CRLF.")
            (foveal-window-add-buffer))
          (with-temp-buffer
            (insert "make: building\ncalc.py:4:12: error: name 'pi' is not defined\n    return pi * r\n\nmake: done\n")
            (compilation-mode)
            (font-lock-ensure)
            (compilation--ensure-parse (point-max))
            (foveal-test--goto-line 2)
            (foveal-window-add-error))
          (let* ((items (plist-get (foveal-test--foveal "window" "list" "--json") :items))
                 (error-item (nth 2 items)))
            (should (equal (mapcar (lambda (i) (plist-get i :type)) items)
                           '("code" "text" "error")))
            (should (equal (plist-get error-item :content)
                           "calc.py:4:12: error: name 'pi' is not defined\n    return pi * r"))
            (should (equal (plist-get (plist-get error-item :metadata) :start_line) 4)))
          ;; The list: d removes the item at point, C clears.
          (with-current-buffer (foveal-window-list)
            (should (eq major-mode 'foveal-window-list-mode))
            (should (= (length tabulated-list-entries) 3))
            (goto-char (point-min))
            (should (equal (tabulated-list-get-id) "ctx-1"))
            (should (string-search "calc.py:3-4" (buffer-string)))
            (execute-kbd-macro (kbd "d"))
            (should (= (length tabulated-list-entries) 2))
            (should-not (string-search "calc.py:3-4" (buffer-string))))
          (should (equal (mapcar (lambda (i) (plist-get i :id))
                                 (plist-get (foveal-test--foveal "window" "list" "--json")
                                            :items))
                         '("ctx-2" "ctx-3")))
          (with-current-buffer "*foveal-window*"
            (cl-letf (((symbol-function 'yes-or-no-p) (lambda (&rest _) t)))
              (execute-kbd-macro (kbd "C")))
            (should (null tabulated-list-entries)))
          (should (null (plist-get (foveal-test--foveal "window" "list" "--json") :items))))
      (when (get-file-buffer py)
        (kill-buffer (get-file-buffer py)))
      (foveal-test--reset))))

(ert-deftest foveal-test-context-links-open-their-headlines ()
  (skip-unless (foveal-test--scenario-p "memex"))
  (foveal-test--setup)
  (unwind-protect
      (progn
        (with-current-buffer (foveal-test--visit "work.org")
          (foveal-test--goto-line 8)
          (foveal-focus-here))
        (foveal-test--wait-focus (lambda (f) (equal f "docs")))
        (with-current-buffer (foveal-context)
          (should (eq major-mode 'foveal-context-mode))
          (should buffer-read-only)
          (let ((text (buffer-string)))
            (should (string-search "## Context Debug" text))
            (should (string-search "- Focus: docs" text))
            ;; The private headline is nowhere.
            (should-not (string-search "Health" text))
            (should-not (string-search "CANARY" text)))
          (goto-char (point-min))
          (should (search-forward "[Write docs]]" nil t))
          (backward-char 3)
          (org-open-at-point)
          (should (equal (buffer-file-name) (foveal-test--dir "memex" "work.org")))
          (should (= (line-number-at-pos) 7))
          (should (looking-at-p "\\*\\* TODO Write docs")))
        (with-current-buffer "*foveal-context*"
          (goto-char (point-min))
          (should (search-forward "[Launch]]" nil t))
          (backward-char 3)
          (org-open-at-point)
          (should (= (line-number-at-pos) 2))
          (should (looking-at-p "\\* Launch"))))
    (foveal-test--reset)))

;;;; A host that dies and comes back (scenario reconnect)

(ert-deftest foveal-test-chat-starts-a-host-and-reconnects-when-one-is-back ()
  "No host at first: `foveal-chat' starts one.  It dies; another comes."
  (skip-unless (foveal-test--scenario-p "reconnect"))
  (foveal-test--setup)
  (unwind-protect
      (let ((buffer (progn
                      (should-not (foveal--host-answers-p))
                      (foveal-chat))))
        (with-current-buffer buffer
          (should (string-search "[no host was running: started `foveal run --no-repl' in the background"
                                 (buffer-string)))
          (foveal-test--wait "the started host" (lambda () foveal--connected) 60)
          (foveal--chat-send "First")
          (foveal-test--wait "the first reply" (lambda () (null foveal--turn)))
          (should (string-search "You: First\nFirst reply." (buffer-string)))
          ;; The host dies.
          (let ((pid foveal--pid))
            (should (integerp pid))
            (signal-process pid 'KILL))
          (foveal-test--wait "the lost host" (lambda () (not foveal--connected)))
          (should (string-prefix-p "DISCONNECTED" (foveal--header-line)))
          (should (string-search "[the host went away (" (buffer-string)))
          ;; One comes back: the buffer reconnects by itself.
          (foveal-start-host)
          (foveal-test--wait "the reconnection" (lambda () foveal--connected) 60)
          (should (string-search "[connected to foveal " (buffer-string)))
          (should (string-prefix-p "foveal " (foveal--header-line)))
          (foveal--chat-send "Second")
          (foveal-test--wait "the second reply" (lambda () (null foveal--turn)))
          (should (string-search "You: Second\nSecond reply." (buffer-string)))))
    (call-process (getenv "FOVEAL_TEST_EXECUTABLE") nil nil nil "stop")
    (foveal-test--reset)))

(provide 'foveal-test)

;;; foveal-test.el ends here
