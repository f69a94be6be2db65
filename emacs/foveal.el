;;; foveal.el --- Chat with a foveal host; focus and context from Emacs -*- lexical-binding: t; -*-

;; Copyright (C) 2025 The foveal authors

;; Author: The foveal authors
;; Version: 0.2.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: tools, convenience, outlines
;; URL: https://example.invalid/foveal
;; SPDX-License-Identifier: MIT OR Apache-2.0

;; This file is not part of GNU Emacs.

;;; Commentary:

;; A client of a running foveal host, on its control socket (a Unix
;; socket speaking JSON lines; docs/agent.md, "The control socket").
;;
;; - `foveal-chat': the conversation, in a buffer.  RET sends; the reply
;;   streams in; tool calls fold to one line (RET or TAB on it unfolds);
;;   C-c C-c cancels the turn in flight.  The header line shows the
;;   host's version, the model, the focus and the context gauge.  With no
;;   host running, one is started in the background (`foveal run
;;   --no-repl') and the buffer says so; when the host goes away the
;;   buffer says so and reconnects when a host is back.
;; - `foveal-send': the region, or a message read in the minibuffer, to
;;   the same conversation.
;; - `foveal-focus-here': the Org headline at point becomes the host's
;;   focus (with or without an :ID:); `foveal-follow-mode' makes the
;;   focus follow point in the memex's Org buffers.
;; - `foveal-window-add-region', `foveal-window-add-buffer',
;;   `foveal-window-add-error', `foveal-window-list': the context window.
;; - `foveal-context': what the next cycle would see, each object a link
;;   to its headline.
;; - `foveal-status', and `foveal-gauge-mode' for the gauge in the mode
;;   line.
;;
;; The package sends the host only what you send or attach, and reads no
;; file you did not attach.  See docs/emacs.md.

;;; Code:

(require 'button)
(require 'seq)
(require 'subr-x)
(require 'tabulated-list)

(declare-function org-link-make-string "ol" (link &optional description))
(declare-function org-open-at-point "org" (&optional arg))
(declare-function org-escape-code-in-string "org-src" (s))
(declare-function compilation--message->loc "compile" (cl-x) t)
(declare-function project-root "project" (project))
(declare-function project-current "project" (&optional maybe-prompt directory))
(declare-function outline-show-all "outline" ())

;;;; Settings

(defgroup foveal nil
  "A client of the foveal agent host."
  :group 'tools
  :prefix "foveal-")

(defcustom foveal-executable "foveal"
  "The foveal executable, used to start a host when none runs."
  :type 'string)

(defcustom foveal-socket nil
  "The host's control socket, or nil to find it as the host does.
nil means: the environment variable FOVEAL_SOCKET, else
$XDG_RUNTIME_DIR/foveal/control.sock, else run/control.sock in the
data folder (FOVEAL_DATA_DIR, else $XDG_DATA_HOME/foveal, else
~/.local/share/foveal).  A socket set in the configuration file
\(agent.socket) must be set here too."
  :type '(choice (const :tag "As the host finds it" nil) file))

(defcustom foveal-run-arguments nil
  "Arguments added to `foveal run --no-repl' when a host is started.
For example (\"--session\" \"work\" \"--memex\" \"~/memex\")."
  :type '(repeat string))

(defcustom foveal-host-directory nil
  "The folder a host is started in, or nil for the current one.
The host reads ./config/foveal.toml there, and relative paths in
`foveal-run-arguments' are read from there."
  :type '(choice (const :tag "The current buffer's folder" nil) directory))

(defcustom foveal-start-host t
  "Whether `foveal-chat' starts a host when none runs."
  :type 'boolean)

(defcustom foveal-follow-delay 0.3
  "Seconds of idle time before `foveal-follow-mode' moves the focus."
  :type 'number)

(defcustom foveal-reconnect-max 2.0
  "The longest wait, in seconds, between attempts to reach a lost host."
  :type 'number)

(defcustom foveal-mode-languages
  '((python-mode . "python") (python-ts-mode . "python")
    (rust-mode . "rust") (rustic-mode . "rust") (rust-ts-mode . "rust")
    (emacs-lisp-mode . "elisp") (lisp-interaction-mode . "elisp")
    (lisp-mode . "lisp") (scheme-mode . "scheme")
    (clojure-mode . "clojure") (c-mode . "c") (c++-mode . "cpp")
    (java-mode . "java") (js-mode . "javascript") (js2-mode . "javascript")
    (typescript-mode . "typescript") (go-mode . "go") (ruby-mode . "ruby")
    (sh-mode . "bash") (perl-mode . "perl") (cperl-mode . "perl")
    (haskell-mode . "haskell") (sql-mode . "sql") (css-mode . "css")
    (mhtml-mode . "html") (html-mode . "html") (json-mode . "json")
    (js-json-mode . "json") (yaml-mode . "yaml") (toml-mode . "toml")
    (conf-toml-mode . "toml") (markdown-mode . "markdown")
    (org-mode . "org") (makefile-mode . "makefile")
    (dockerfile-mode . "dockerfile") (lua-mode . "lua") (php-mode . "php")
    (latex-mode . "latex"))
  "The language of a code block attached from a buffer, by major mode.
A mode not listed takes the language of the nearest mode it derives
from that is; else the host goes by the file's extension."
  :type '(alist :key-type symbol :value-type string))

(defface foveal-user '((t :inherit font-lock-keyword-face :weight bold))
  "Your messages in the chat buffer.")

(defface foveal-note '((t :inherit shadow :slant italic))
  "What the chat buffer says of the connection.")

(defface foveal-tool '((t :inherit font-lock-comment-face))
  "A tool call's line in the chat buffer.")

(defface foveal-prompt '((t :inherit minibuffer-prompt))
  "The chat buffer's prompt.")

(defface foveal-lost '((t :inherit error))
  "The header line's word for a lost host.")

(defconst foveal-version "0.2.0"
  "This client's version, said to the host in `hello'.")

(defconst foveal-protocol 1
  "The control protocol this client speaks.")

(define-error 'foveal-error "foveal")

;;;; The connection

(defun foveal--env (name)
  "The environment variable NAME, or nil when it is unset or empty."
  (let ((value (getenv name)))
    (and value (not (string-empty-p value)) value)))

(defun foveal--data-dir ()
  "The host's data folder, found as the host does."
  (let ((xdg (foveal--env "XDG_DATA_HOME")))
    (expand-file-name
     (or (foveal--env "FOVEAL_DATA_DIR")
         (expand-file-name "foveal" (if (and xdg (file-name-absolute-p xdg))
                                        xdg
                                      "~/.local/share"))))))

(defun foveal-socket-path ()
  "The control socket's path: `foveal-socket', else found as the host does."
  (expand-file-name
   (or foveal-socket
       (foveal--env "FOVEAL_SOCKET")
       (let ((runtime (foveal--env "XDG_RUNTIME_DIR")))
         (and runtime (expand-file-name "foveal/control.sock" runtime)))
       (expand-file-name "run/control.sock" (foveal--data-dir)))))

(defun foveal--parse (line)
  "LINE, one JSON object, as a plist; an error event when unreadable."
  (condition-case nil
      (json-parse-string line :object-type 'plist :null-object nil
                         :false-object :false :array-type 'list)
    (json-error (list :event "error"
                      :message (format "unreadable answer from the host: %s"
                                       line)))))

(defun foveal--filter (process string)
  "Hand each whole line PROCESS sent, in STRING, to its handler."
  (let ((data (concat (process-get process 'foveal-pending) string))
        (start 0))
    (while (string-match "\n" data start)
      (let ((line (substring data start (match-beginning 0))))
        (setq start (match-end 0))
        (unless (string-blank-p line)
          (funcall (process-get process 'foveal-handler)
                   (foveal--parse line)))))
    (process-put process 'foveal-pending (substring data start))))

(defun foveal--sentinel (process event)
  "Tell PROCESS's closed handler once it ended, and why (EVENT)."
  (unless (or (process-live-p process) (process-get process 'foveal-ended))
    (process-put process 'foveal-ended t)
    (let ((closed (process-get process 'foveal-closed)))
      (when closed
        (funcall closed (string-trim event))))))

(defun foveal--connect (name handler &optional closed)
  "Open a connection NAME to the host, handing each reply to HANDLER.
CLOSED, when given, is called with the reason once the connection
ends.  Signals `foveal-error' when no host answers."
  (let ((socket (foveal-socket-path)))
    (condition-case err
        (let ((process (make-network-process
                        :name name :family 'local :service socket
                        :coding 'utf-8-unix :noquery t
                        :filter #'foveal--filter
                        :sentinel #'foveal--sentinel)))
          (process-put process 'foveal-pending "")
          (process-put process 'foveal-handler handler)
          (process-put process 'foveal-closed closed)
          process)
      (file-error
       (signal 'foveal-error
               (list (format "no foveal host is running (cannot connect to %s: %s)"
                             socket (error-message-string err))))))))

(defun foveal--write (process request)
  "Write REQUEST, a plist, to PROCESS as one JSON line."
  (process-send-string process (concat (json-serialize request) "\n")))

(defun foveal--close (process)
  "Close PROCESS without calling its closed handler."
  (when (processp process)
    (process-put process 'foveal-ended t)
    (delete-process process)))

(defun foveal--request (request handler &optional closed)
  "Send REQUEST on a connection of its own; its replies go to HANDLER.
CLOSED is called with the reason when the host closes the
connection.  Returns the connection."
  (let ((process (foveal--connect "foveal-request" handler closed)))
    (foveal--write process request)
    process))

(defun foveal--request-sync (request &optional timeout)
  "Send REQUEST and wait for the host to answer it; return its replies.
Waits at most TIMEOUT seconds (30 by default).  An `error' event
answering it signals `foveal-error' with the host's message."
  (let* ((replies nil)
         (ended nil)
         (process (foveal--request request
                                   (lambda (reply) (push reply replies))
                                   (lambda (_why) (setq ended t))))
         (deadline (+ (float-time) (or timeout 30))))
    (while (and (not ended) (< (float-time) deadline))
      (accept-process-output process 0.05))
    (unless ended
      (foveal--close process)
      (signal 'foveal-error (list "the host did not answer in time")))
    (setq replies (nreverse replies))
    (let ((error (seq-find (lambda (r) (equal (plist-get r :event) "error"))
                           replies)))
      (when error
        (signal 'foveal-error (list (plist-get error :message)))))
    replies))

(defun foveal--answer (request event)
  "Send REQUEST and return the reply whose event is EVENT.
Signals `foveal-error' when the host answers otherwise."
  (let ((replies (foveal--request-sync request)))
    (or (seq-find (lambda (r) (equal (plist-get r :event) event)) replies)
        (signal 'foveal-error
                (list (format "unexpected answer from the host: %S" replies))))))

;;;; The subscription: the host's state, pushed

(defvar foveal--link nil
  "The subscription: one connection, `hello' then `subscribe'.")

(defvar foveal--connected nil
  "Non-nil once the host answered `hello' on the subscription.")

(defvar foveal--lost nil
  "Why the host cannot be reached, or nil.")

(defvar foveal--mismatch nil
  "Why the host does not speak this client's protocol, or nil.")

(defvar foveal--host nil
  "The host's version, from `hello'.")

(defvar foveal--model nil
  "The host's model, from `hello'.")

(defvar foveal--session nil
  "The host's session.")

(defvar foveal--pid nil
  "The host's process id.")

(defvar foveal--focus nil
  "The host's focus: the object's id, or nil.")

(defvar foveal--focus-title nil
  "The title of the object in focus.")

(defvar foveal--usage nil
  "The context gauge: the share of the budget the last prompt used.")

(defvar foveal--busy nil
  "Non-nil while a turn runs on the host.")

(defvar foveal--memex-roots nil
  "The memex's files and folders, as the host reported them.")

(defvar foveal--roots-generation 0
  "Bumped when `foveal--memex-roots' changes.")

(defvar foveal--reconnect-timer nil
  "The timer of the next attempt to reach a lost host.")

(defvar foveal--reconnect-wait 0.1
  "Seconds until the next attempt; doubled up to `foveal-reconnect-max'.")

(defvar foveal-gauge-mode)
(defvar foveal-follow-mode)

(defun foveal--chat-buffers ()
  "The live chat buffers."
  (seq-filter (lambda (b) (eq (buffer-local-value 'major-mode b) 'foveal-chat-mode))
              (buffer-list)))

(defun foveal--link-wanted ()
  "Whether anything displays the host's state: a chat buffer or a mode."
  (or (bound-and-true-p foveal-gauge-mode)
      (bound-and-true-p foveal-follow-mode)
      (foveal--chat-buffers)))

(defun foveal--apply-status (status)
  "Take the host's state from STATUS, the object of `foveal status'."
  (setq foveal--focus (plist-get status :focus)
        foveal--focus-title (plist-get status :focus_title)
        foveal--usage (plist-get status :usage_percent)
        foveal--session (plist-get status :session)
        foveal--pid (plist-get status :pid))
  (let ((roots (mapcar #'file-name-as-directory
                       (plist-get status :memex_roots))))
    (unless (equal roots foveal--memex-roots)
      (setq foveal--memex-roots roots
            foveal--roots-generation (1+ foveal--roots-generation)))))

(defun foveal--link-reply (reply)
  "Take REPLY, a line of the subscription."
  (pcase (plist-get reply :event)
    ("hello"
     (let ((was-lost foveal--lost))
       (setq foveal--connected t
             foveal--lost nil
             foveal--host (plist-get reply :host)
             foveal--model (plist-get reply :model)
             foveal--reconnect-wait 0.1
             foveal--mismatch
             (unless (eql (plist-get reply :protocol) foveal-protocol)
               (format "the host speaks control protocol %s, this client %s"
                       (plist-get reply :protocol) foveal-protocol)))
       (foveal--apply-status (plist-get reply :status))
       (when was-lost
         (foveal--note (format "connected to foveal %s" foveal--host)))))
    ("error"
     (let ((message (plist-get reply :message)))
       (unless foveal--connected
         (when (string-match-p "unknown variant" message)
           (setq foveal--mismatch
                 (format "the host does not speak control protocol %s (it answered: %s); run a host of version %s"
                         foveal-protocol message foveal-version)))
         ;; Refused before the handshake (stopping, too many clients):
         ;; lost, for the reason the host gave.
         (when foveal--link
           (process-put foveal--link 'foveal-why message)))))
    ("cycle_started" (setq foveal--busy t))
    ("cycle_finished"
     (setq foveal--busy nil
           foveal--usage (plist-get reply :usage_percent)))
    ("focus"
     (setq foveal--focus (plist-get reply :focus)
           foveal--focus-title (plist-get reply :title)))
    ("status" (foveal--apply-status (plist-get reply :status))))
  (force-mode-line-update t))

(defun foveal--link-closed (why)
  "The subscription ended, for WHY: say so and try again later."
  (let ((why (or (and foveal--link (process-get foveal--link 'foveal-why)) why))
        (was-connected foveal--connected))
    (setq foveal--link nil
          foveal--connected nil
          foveal--busy nil
          foveal--lost why)
    (when was-connected
      (foveal--note (format "the host went away (%s); reconnecting when it is back"
                            why)))
    (foveal--schedule-reconnect)
    (force-mode-line-update t)))

(defun foveal--link-open ()
  "Open the subscription; nil (and the reason noted) when no host answers."
  (condition-case err
      (let ((process (foveal--connect "foveal-link" #'foveal--link-reply
                                      #'foveal--link-closed)))
        (setq foveal--link process)
        (foveal--write process (list :cmd "hello" :protocol foveal-protocol
                                     :client foveal-version))
        (foveal--write process (list :cmd "subscribe"))
        t)
    (foveal-error
     (setq foveal--lost (cadr err))
     (force-mode-line-update t)
     nil)))

(defun foveal--schedule-reconnect ()
  "Try to reach the host again soon, while something displays its state."
  (when (and (foveal--link-wanted) (not foveal--reconnect-timer))
    (setq foveal--reconnect-timer
          (run-at-time foveal--reconnect-wait nil #'foveal--reconnect))
    (setq foveal--reconnect-wait (min (* 2 foveal--reconnect-wait)
                                      foveal-reconnect-max))))

(defun foveal--reconnect ()
  "One attempt to reach the host."
  (setq foveal--reconnect-timer nil)
  (when (and (foveal--link-wanted) (not (process-live-p foveal--link)))
    (unless (foveal--link-open)
      (foveal--schedule-reconnect))))

(defun foveal--link-ensure ()
  "Open the subscription unless it is open; non-nil when it is."
  (or (process-live-p foveal--link)
      (foveal--link-open)
      (progn (foveal--schedule-reconnect) nil)))

(defun foveal--link-release ()
  "Close the subscription when nothing displays the host's state any more."
  (unless (foveal--link-wanted)
    (when foveal--reconnect-timer
      (cancel-timer foveal--reconnect-timer)
      (setq foveal--reconnect-timer nil))
    (foveal--close foveal--link)
    (setq foveal--link nil
          foveal--connected nil)))

;;;; Starting a host

(defun foveal--host-log ()
  "Where a host started from Emacs writes its output."
  (expand-file-name "run/host.log" (foveal--data-dir)))

;;;###autoload
(defun foveal-start-host ()
  "Start `foveal run --no-repl' in the background, detached from Emacs.
It keeps running when Emacs exits (`foveal stop' stops it); its
output goes to run/host.log in the data folder.  Returns a sentence
saying so."
  (interactive)
  (let* ((log (foveal--host-log))
         (default-directory (file-name-as-directory
                             (expand-file-name (or foveal-host-directory
                                                   default-directory))))
         (executable (or (executable-find foveal-executable)
                         (user-error "Cannot find the foveal executable %S; set `foveal-executable'"
                                     foveal-executable))))
    (make-directory (file-name-directory log) t)
    ;; A session of its own (setsid) and no terminal: neither Emacs
    ;; exiting nor a hangup reaches it.
    (apply #'call-process "/bin/sh" nil 0 nil "-c"
           (concat "if command -v setsid >/dev/null 2>&1; "
                   "then exec setsid \"$@\" </dev/null >>\"$0\" 2>&1; "
                   "else exec \"$@\" </dev/null >>\"$0\" 2>&1; fi")
           log executable "run" "--no-repl" foveal-run-arguments)
    (let ((note (format "no host was running: started `foveal run --no-repl' in the background (log %s); it keeps running when Emacs exits; `foveal stop' stops it"
                        log)))
      (when (called-interactively-p 'any)
        (message "%s" note))
      note)))

(defun foveal--host-answers-p ()
  "Whether a host accepts a connection on the socket."
  (condition-case nil
      (progn (foveal--close (foveal--connect "foveal-probe" #'ignore)) t)
    (foveal-error nil)))

;;;; The chat buffer

(defvar-local foveal--out nil
  "Where the conversation's next output is inserted: before the prompt.")

(defvar-local foveal--in nil
  "Where the input starts: after the prompt.")

(defvar-local foveal--turn nil
  "The connection of the turn in flight, or nil.")

(defvar-local foveal--queued nil
  "Messages waiting for the turn in flight to end.")

(defvar-local foveal--text-pieces 0
  "Pieces of text the turn in flight streamed so far.")

(defvar-local foveal--sent-at nil
  "When the turn in flight was sent (`float-time').")

(defvar-local foveal--first-text-at nil
  "When the turn in flight's first text was shown (`float-time').")

(defvar foveal-chat-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'foveal-chat-send-input)
    (define-key map (kbd "C-c C-c") #'foveal-cancel)
    (define-key map (kbd "TAB") #'forward-button)
    (define-key map (kbd "<backtab>") #'backward-button)
    map)
  "Keys of `foveal-chat-mode'.")

(define-derived-mode foveal-chat-mode fundamental-mode "foveal"
  "The conversation with the foveal host.
RET sends the input; the reply streams in above the prompt.  Tool
calls are folded to one line: RET on it unfolds it.  \\[foveal-cancel]
cancels the turn in flight.

\\{foveal-chat-mode-map}"
  (setq-local header-line-format '(:eval (foveal--mode-line-text
                                          (foveal--header-line))))
  (setq-local truncate-lines nil)
  (visual-line-mode 1)
  (add-hook 'kill-buffer-hook #'foveal--chat-killed nil t)
  (let ((inhibit-read-only t))
    (erase-buffer)
    (insert (propertize "> " 'face 'foveal-prompt 'read-only t
                        'front-sticky '(read-only) 'rear-nonsticky t))
    (setq foveal--out (copy-marker (point-min) t))
    (setq foveal--in (point-marker))))

(defun foveal--chat-killed ()
  "Close what the chat buffer held."
  (foveal--close foveal--turn)
  (setq foveal--turn nil)
  ;; The buffer is still in the list while its hook runs: look after it.
  (run-at-time 0 nil #'foveal--link-release))

(defun foveal--header-line ()
  "The chat buffer's header line: the host, the model, focus and gauge."
  (let ((parts
         (list (format "foveal %s" (or foveal--host "?"))
               (or foveal--model "-")
               (format "focus: %s"
                       (cond ((null foveal--focus) "-")
                             (foveal--focus-title
                              (format "%s (%s)" foveal--focus-title foveal--focus))
                             (t foveal--focus)))
               (foveal--gauge))))
    (when foveal--turn
      (setq parts (append parts '("working…"))))
    (cond
     (foveal--mismatch
      (concat (propertize "PROTOCOL MISMATCH" 'face 'foveal-lost) ": "
              foveal--mismatch))
     ((not foveal--connected)
      (concat (propertize "DISCONNECTED" 'face 'foveal-lost)
              (if foveal--lost (format ": %s" foveal--lost) "")
              " (reconnecting)"))
     (t (string-join parts " │ ")))))

(defun foveal--mode-line-text (text)
  "TEXT for a mode line construct, to appear as it is: each % doubled."
  (string-replace "%" "%%" text))

(defun foveal--gauge ()
  "The context gauge: `Context N%', or `Context –' without one."
  (if foveal--usage
      (format "Context %d%%" foveal--usage)
    "Context –"))

(defun foveal--insert (text &rest properties)
  "Insert TEXT with PROPERTIES in the conversation, above the prompt."
  (let ((inhibit-read-only t))
    (save-excursion
      (goto-char foveal--out)
      (insert (apply #'propertize text 'read-only t properties)))))

(defun foveal--fresh-line ()
  "Start a new line in the conversation unless one is started."
  (let ((at (marker-position foveal--out)))
    (unless (or (= at (point-min)) (eq (char-before at) ?\n))
      (foveal--insert "\n"))))

(defun foveal--note (text)
  "Say TEXT in every chat buffer (a note on the connection)."
  (dolist (buffer (foveal--chat-buffers))
    (with-current-buffer buffer
      (foveal--fresh-line)
      (foveal--insert (concat "[" text "]\n") 'face 'foveal-note))))

(defun foveal--chat-buffer ()
  "The chat buffer, made when there is none, and the host reached."
  (let ((buffer (get-buffer "*foveal*")))
    (unless (and buffer (eq (buffer-local-value 'major-mode buffer)
                            'foveal-chat-mode))
      (setq buffer (get-buffer-create "*foveal*"))
      (with-current-buffer buffer (foveal-chat-mode)))
    (unless (process-live-p foveal--link)
      (when (and foveal-start-host (not (foveal--host-answers-p)))
        (let ((note (foveal-start-host)))
          (with-current-buffer buffer
            (foveal--fresh-line)
            (foveal--insert (concat "[" note "]\n") 'face 'foveal-note))))
      (foveal--link-ensure))
    buffer))

;;;###autoload
(defun foveal-chat ()
  "Show the conversation with the running foveal host.
With no host running, start one in the background (see the
command `foveal-start-host') and say so.  Returns the chat buffer."
  (interactive)
  (let ((buffer (foveal--chat-buffer)))
    (pop-to-buffer buffer)
    (goto-char (point-max))
    buffer))

(defun foveal-chat-send-input ()
  "Send the input after the prompt, or follow the button at point."
  (interactive)
  (if (button-at (point))
      (push-button (point))
    (let ((text (string-trim (buffer-substring-no-properties foveal--in (point-max)))))
      (if (string-empty-p text)
          (message "Type a message after the prompt")
        (let ((inhibit-read-only t))
          (delete-region foveal--in (point-max)))
        (foveal--chat-send text)))))

(defun foveal--chat-send (text)
  "Send TEXT from the current chat buffer, or queue it behind the turn."
  (if foveal--turn
      (progn
        (setq foveal--queued (append foveal--queued (list text)))
        (message "foveal: queued; sent when the turn in flight ends"))
    (foveal--start-turn text)))

(defun foveal--start-turn (text)
  "Send TEXT to the host as the user's message; stream the reply here."
  (let ((buffer (current-buffer)))
    (setq foveal--text-pieces 0
          foveal--sent-at (float-time)
          foveal--first-text-at nil)
    (foveal--fresh-line)
    (foveal--insert (concat "You: " text "\n") 'face 'foveal-user)
    (condition-case err
        (setq foveal--turn
              (foveal--request
               (list :cmd "send" :text text)
               (lambda (reply)
                 (when (buffer-live-p buffer)
                   (with-current-buffer buffer (foveal--turn-reply reply))))
               (lambda (why)
                 (when (buffer-live-p buffer)
                   (with-current-buffer buffer (foveal--turn-closed why))))))
      (foveal-error
       (foveal--insert (format "[%s]\n" (cadr err)) 'face 'foveal-note)))
    (force-mode-line-update)))

(defun foveal--turn-reply (reply)
  "Show REPLY, a line of the turn in flight."
  (pcase (plist-get reply :event)
    ("text"
     (unless foveal--first-text-at
       (setq foveal--first-text-at (float-time)))
     (setq foveal--text-pieces (1+ foveal--text-pieces))
     (foveal--insert (plist-get reply :text)))
    ("tool" (foveal--insert-tool reply))
    ("done" (foveal--turn-end))
    ("error"
     (foveal--fresh-line)
     (foveal--insert (format "error: %s\n" (plist-get reply :message))
                     'face 'error)
     (foveal--turn-end))))

(defun foveal--turn-closed (why)
  "The turn's connection ended, for WHY, before its `done' if still open."
  (when foveal--turn
    (foveal--fresh-line)
    (foveal--insert (format "[the host closed the connection before its reply was complete (%s); the message may not have been answered]\n"
                            why)
                    'face 'foveal-note)
    (foveal--turn-end)))

(defun foveal--turn-end ()
  "The turn ended: a blank line, then the next message queued, if any."
  (foveal--close foveal--turn)
  (setq foveal--turn nil)
  (foveal--fresh-line)
  (foveal--insert "\n")
  (force-mode-line-update)
  (when foveal--queued
    (foveal--start-turn (pop foveal--queued))))

(define-button-type 'foveal-tool
  'action #'foveal--toggle-tool
  'face 'foveal-tool
  'follow-link t
  'help-echo "RET: show or hide what the tool returned")

(defun foveal--insert-tool (reply)
  "Show REPLY, a tool that ran, folded to one line."
  (foveal--fresh-line)
  (let* ((ok (not (eq (plist-get reply :ok) :false)))
         (result (or (plist-get reply :result) ""))
         (label (format "▸ tool %s: %s" (plist-get reply :name)
                        (if ok "ok" (car (split-string result "\n"))))))
    (let ((inhibit-read-only t))
      (save-excursion
        (goto-char foveal--out)
        (insert-text-button label :type 'foveal-tool 'foveal-result result
                            'read-only t)
        (insert (propertize "\n" 'read-only t))))))

(defun foveal--toggle-tool (button)
  "Show or hide what the tool of BUTTON returned."
  (let ((inhibit-read-only t)
        (shown (button-get button 'foveal-shown))
        (start (button-start button)))
    (save-excursion
      (if shown
          (progn
            (delete-region (car shown) (cdr shown))
            (set-marker (car shown) nil)
            (set-marker (cdr shown) nil)
            (button-put button 'foveal-shown nil)
            (subst-char-in-region start (1+ start) ?▾ ?▸ t))
        (goto-char (button-end button))
        (forward-line 1)
        (let ((from (point-marker))
              (text (replace-regexp-in-string
                     "^" "    " (string-trim-right
                                 (button-get button 'foveal-result)))))
          (insert (propertize (concat text "\n") 'read-only t
                              'face 'foveal-tool))
          (button-put button 'foveal-shown (cons from (point-marker)))
          (subst-char-in-region start (1+ start) ?▸ ?▾ t))))))

;;;###autoload
(defun foveal-send (text)
  "Send TEXT to the host's conversation; the reply streams in `foveal-chat'.
Interactively, the region when it is active, else a message read in
the minibuffer."
  (interactive
   (list (if (use-region-p)
             (buffer-substring-no-properties (region-beginning) (region-end))
           (read-string "Message to foveal: "))))
  (when (string-blank-p text)
    (user-error "Nothing to send"))
  (let ((buffer (foveal--chat-buffer)))
    (display-buffer buffer)
    (with-current-buffer buffer
      (foveal--chat-send text))))

;;;###autoload
(defun foveal-cancel ()
  "Cancel the turn in flight on the host (what it wrote so far is kept)."
  (interactive)
  (let* ((reply (foveal--answer (list :cmd "cancel") "cancelled"))
         (in-flight (eq (plist-get reply :in_flight) t)))
    (message (if in-flight "foveal: cancelling the turn in flight"
               "foveal: no turn is in flight"))
    in-flight))

;;;; The mode line

(defun foveal--lighter ()
  "The mode line's lighter: the gauge, or that the host is away."
  (cond ((not foveal--connected) " foveal:off")
        (t (concat " " (foveal--gauge)))))

;;;###autoload
(define-minor-mode foveal-gauge-mode
  "Show the host's context gauge (`Context N%') in the mode line."
  :global t
  :lighter (:eval (foveal--mode-line-text (foveal--lighter)))
  (if foveal-gauge-mode
      (foveal--link-ensure)
    (foveal--link-release)))

;;;###autoload
(defun foveal-status ()
  "Show the running host's status in a buffer, and a summary in the echo area."
  (interactive)
  (let* ((status (plist-get (foveal--answer (list :cmd "status") "status")
                            :status))
         (buffer (get-buffer-create "*foveal-status*"))
         (last (plist-get status :last_cycle)))
    (foveal--apply-status status)
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (dolist (row `(("pid" ,(plist-get status :pid))
                       ("uptime" ,(format "%s s" (plist-get status :uptime_secs)))
                       ("provider" ,(plist-get status :provider))
                       ("session" ,(plist-get status :session))
                       ("registry gen" ,(plist-get status :registry_generation))
                       ("memex gen" ,(plist-get status :memex_generation))
                       ("usage" ,(let ((u (plist-get status :usage_percent)))
                                   (if u (format "%s%%" u) "-")))
                       ("cycles" ,(plist-get status :cycles))
                       ("focus" ,(or (plist-get status :focus) "-"))
                       ("focus title" ,(or (plist-get status :focus_title) "-"))
                       ("last cycle" ,(if last
                                          (format "#%s %s (%s)"
                                                  (plist-get last :id)
                                                  (plist-get last :signal)
                                                  (plist-get last :context_type))
                                        "none"))))
          (insert (format "%-14s %s\n" (concat (car row) ":") (cadr row))))
        (insert "skills:\n")
        (dolist (skill (plist-get status :skills))
          (insert (format "  %s %s — %s\n" (plist-get skill :name)
                          (or (plist-get skill :version) "")
                          (plist-get skill :status))))
        (goto-char (point-min)))
      (special-mode))
    (display-buffer buffer)
    (message "foveal: session %s, %s, focus %s, %s"
             (plist-get status :session) (plist-get status :provider)
             (or (plist-get status :focus) "-") (foveal--gauge))
    status))

;;;; The focus

(defun foveal--memex-file-p (file)
  "Whether FILE is in the memex, by the roots the host reported."
  (let ((true (file-truename file)))
    (seq-some (lambda (root)
                (or (string-prefix-p root true)
                    (string= (directory-file-name root) true)))
              foveal--memex-roots)))

(defun foveal--focus-request (file line callback)
  "Ask the host to focus the object at LINE of FILE.
CALLBACK gets the answer: a `focus' or an `error' event."
  (let ((answered nil))
    (foveal--request (list :cmd "focus" :file (expand-file-name file) :line line)
                     (lambda (reply)
                       (setq answered t)
                       (funcall callback reply))
                     (lambda (why)
                       (unless answered
                         (funcall callback
                                  (list :event "error"
                                        :message (format "the host closed the connection (%s)"
                                                         why))))))))

(defun foveal--focus-said (reply)
  "Say what REPLY, the answer to a focus request, means."
  (if (equal (plist-get reply :event) "focus")
      (progn
        (setq foveal--focus (plist-get reply :focus)
              foveal--focus-title (plist-get reply :title))
        (force-mode-line-update t)
        (message "foveal: focus on %s (%s)" (or foveal--focus-title "-")
                 (or foveal--focus "none")))
    (message "foveal: %s" (plist-get reply :message))))

;;;###autoload
(defun foveal-focus-here ()
  "Make the Org headline at point the host's focus.
The host takes the headline at or above point's line in the saved
file, also one without an :ID:; it refuses a private one as it
refuses a missing one."
  (interactive)
  (let ((file (buffer-file-name (buffer-base-buffer))))
    (unless (and file (derived-mode-p 'org-mode))
      (user-error "Not an Org file: the focus is a headline of the memex"))
    (when (buffer-modified-p)
      (message "foveal: the buffer is modified; the host reads the saved file"))
    (foveal--focus-request file (line-number-at-pos nil t) #'foveal--focus-said)))

(defvar-local foveal--follow-heading nil
  "The position of the headline at point after the last command.")

(defvar-local foveal--follow-member nil
  "Whether this buffer's file is in the memex: (GENERATION . ANSWER).")

(defvar foveal--follow-sent nil
  "The last position the focus was asked for: (FILE . LINE).")

(defvar foveal--follow-timer nil
  "The idle timer that moves the focus, when armed.")

(defvar foveal--follow-flight nil
  "Non-nil while a focus request of the follow mode is unanswered.")

(defun foveal--follow-here-p ()
  "Whether the focus follows point in this buffer: an Org file of the memex."
  (and buffer-file-name
       (derived-mode-p 'org-mode)
       (let ((known foveal--follow-member))
         (if (eql (car known) foveal--roots-generation)
             (cdr known)
           (cdr (setq foveal--follow-member
                      (cons foveal--roots-generation
                            (foveal--memex-file-p buffer-file-name))))))))

(defun foveal--heading-position ()
  "The position of the headline at or above point, or 0 before the first."
  (save-excursion
    (end-of-line)
    (if (re-search-backward "^\\*+[ \t]" nil t) (point) 0)))

(defun foveal--follow-check ()
  "After each command: arm the idle timer when point changed headline.
Cheap by design: a search back to the headline and a comparison."
  (when (foveal--follow-here-p)
    (let ((heading (foveal--heading-position)))
      (unless (eql heading foveal--follow-heading)
        (setq foveal--follow-heading heading)
        (unless foveal--follow-timer
          (setq foveal--follow-timer
                (run-with-idle-timer foveal-follow-delay nil
                                     #'foveal--follow-fire)))))))

(defun foveal--follow-fire ()
  "Move the focus to the headline at point, unless it is there already."
  (setq foveal--follow-timer nil)
  (when (and foveal-follow-mode
             (foveal--follow-here-p)
             ;; The host reads the saved file: positions in a modified
             ;; buffer may not be its positions.
             (not (buffer-modified-p)))
    (let ((heading (foveal--heading-position)))
      (when (> heading 0)
        (let ((place (cons buffer-file-name
                           (line-number-at-pos heading t))))
          (unless (equal place foveal--follow-sent)
            (if foveal--follow-flight
                ;; One request at a time: look again once it is answered.
                (setq foveal--follow-flight 'again)
              (setq foveal--follow-sent place
                    foveal--follow-flight t)
              (condition-case nil
                  (foveal--focus-request
                   (car place) (cdr place)
                   (lambda (reply)
                     (let ((again (eq foveal--follow-flight 'again)))
                       (setq foveal--follow-flight nil)
                       (if (equal (plist-get reply :event) "focus")
                           (progn
                             (setq foveal--focus (plist-get reply :focus)
                                   foveal--focus-title (plist-get reply :title))
                             (force-mode-line-update t))
                         ;; Refused or not delivered: not sent, as far
                         ;; as the next look is concerned.
                         (setq foveal--follow-sent nil))
                       (when again
                         (with-current-buffer (window-buffer (selected-window))
                           (foveal--follow-fire))))))
                (foveal-error (setq foveal--follow-flight nil
                                    foveal--follow-sent nil))))))))))

(defun foveal--follow-saved ()
  "After a save the file's positions are the buffer's: look again."
  (when (foveal--follow-here-p)
    (setq foveal--follow-heading nil)
    (foveal--follow-check)))

;;;###autoload
(define-minor-mode foveal-follow-mode
  "Make the host's focus follow point in the memex's Org buffers.
When point rests (`foveal-follow-delay') on another headline of a
saved Org file of the memex, that headline becomes the focus.  Each
command costs a search back to the headline and a comparison."
  :global t
  (if foveal-follow-mode
      (progn
        (add-hook 'post-command-hook #'foveal--follow-check)
        (add-hook 'after-save-hook #'foveal--follow-saved)
        (foveal--link-ensure))
    (remove-hook 'post-command-hook #'foveal--follow-check)
    (remove-hook 'after-save-hook #'foveal--follow-saved)
    (when foveal--follow-timer
      (cancel-timer foveal--follow-timer)
      (setq foveal--follow-timer nil))
    (setq foveal--follow-sent nil)
    (foveal--link-release)))

;;;; The context window

(defun foveal--window (op)
  "Apply OP, a window operation, to the host's context window.
Returns the host's result; signals `user-error' when it refuses."
  (let ((replies (condition-case err
                     (foveal--request-sync (list :cmd "window" :op op))
                   (foveal-error (user-error "foveal: %s" (cadr err))))))
    (let ((window (seq-find (lambda (r) (equal (plist-get r :event) "window"))
                            replies))
          (refused (seq-find (lambda (r) (equal (plist-get r :event) "window_error"))
                             replies)))
      (cond (window (plist-get window :result))
            (refused (user-error "foveal: %s" (plist-get refused :message)))
            (t (user-error "Unexpected answer from the host: %S" replies))))))

(defun foveal--language ()
  "The language of the current buffer's code, from its major mode, or nil."
  (let ((mode major-mode)
        (language nil))
    (while (and mode (not language))
      (setq language (cdr (assq mode foveal-mode-languages))
            mode (get mode 'derived-mode-parent)))
    language))

(defun foveal--file-label ()
  "The current buffer's file as an attached item names it, or nil.
Relative to its project when it is in one, else abbreviated."
  (let ((file (buffer-file-name (buffer-base-buffer))))
    (when file
      (let ((project (and (require 'project nil t) (project-current nil))))
        (if project
            (file-relative-name file (project-root project))
          (abbreviate-file-name file))))))

(defun foveal--add (type content metadata)
  "Attach CONTENT of TYPE with METADATA (a plist); say what was added."
  (when (string-empty-p content)
    (user-error "Nothing to attach: the text is empty"))
  (let* ((op (append (list :op "add" :type type :content content)
                     (and metadata (list :metadata metadata))))
         (result (foveal--window op))
         (added (plist-get result :added))
         (evicted (plist-get result :evicted)))
    (message "foveal: attached %s (%s%s)%s" (plist-get added :id) type
             (let ((file (plist-get metadata :filename)))
               (if file
                   (concat ", " file
                           (if (plist-get metadata :start_line)
                               (format ":%s-%s" (plist-get metadata :start_line)
                                       (plist-get metadata :end_line))
                             ""))
                 ""))
             (if evicted (format "; evicted %d older" (length evicted)) ""))
    added))

;;;###autoload
(defun foveal-window-add-region (start end)
  "Attach the region from START to END to the host's context window.
It goes as code, with its file, its lines and the language of the
major mode."
  (interactive "r")
  (let* ((last (if (and (> end start)
                        (save-excursion (goto-char end) (bolp)))
                   (1- end)
                 end))
         (file (foveal--file-label))
         (language (foveal--language))
         (metadata (append (and file (list :filename file
                                           :start_line (line-number-at-pos start t)
                                           :end_line (line-number-at-pos last t)))
                           (and language (list :language language)))))
    (foveal--add "code" (buffer-substring-no-properties start end) metadata)))

;;;###autoload
(defun foveal-window-add-buffer ()
  "Attach the whole buffer to the host's context window.
A buffer visiting a file goes as a file, with its language; any
other as text."
  (interactive)
  (let ((file (foveal--file-label))
        (language (foveal--language))
        (content (save-restriction
                   (widen)
                   (buffer-substring-no-properties (point-min) (point-max)))))
    (foveal--add (if file "file" "text") content
                 (append (and file (list :filename file))
                         (and file language (list :language language))))))

(defun foveal--error-at-point ()
  "The compilation message at point: (TEXT FILE LINE), or nil.
TEXT is its line and the lines after it up to the next message, a
blank line or 20 lines."
  (let ((message (get-text-property (point) 'compilation-message)))
    (when message
      (save-excursion
        (let* ((start (progn (beginning-of-line) (point)))
               (end (progn
                      (forward-line 1)
                      (let ((count 1))
                        (while (and (< count 20) (not (eobp))
                                    (not (looking-at-p "^[ \t]*$"))
                                    (not (get-text-property (point) 'compilation-message)))
                          (forward-line 1)
                          (setq count (1+ count))))
                      (point)))
               (loc (compilation--message->loc message))
               (file (car-safe (car-safe (nth 2 loc))))
               (line (nth 1 loc)))
          (list (string-trim-right (buffer-substring-no-properties start end))
                (and (stringp file) file)
                line))))))

;;;###autoload
(defun foveal-window-add-error ()
  "Attach the compilation or test error at point to the context window.
The message at point in a `compilation-mode' buffer (a compile, a
grep, a test run), with the lines that follow it; the file it names
is not read."
  (interactive)
  (let ((found (foveal--error-at-point)))
    (unless found
      (user-error "No compilation message at point"))
    (pcase-let ((`(,text ,file ,line) found))
      (foveal--add "error" text
                   (and file (append (list :filename file)
                                     (and line (list :start_line line
                                                     :end_line line))))))))

(defvar foveal-window-list-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map "d" #'foveal-window-list-remove)
    (define-key map "C" #'foveal-window-list-clear)
    map)
  "Keys of `foveal-window-list-mode'.")

(define-derived-mode foveal-window-list-mode tabulated-list-mode "foveal-window"
  "The host's context window, one item a line.
\\[foveal-window-list-remove] removes the item at point,
\\[foveal-window-list-clear] removes them all, \\[revert-buffer] reads
the window again.

\\{foveal-window-list-mode-map}"
  (setq tabulated-list-format [("Id" 8 t) ("Type" 13 t) ("Tokens" 7 t)
                               ("Source" 0 nil)])
  (add-hook 'tabulated-list-revert-hook #'foveal--window-list-read nil t)
  (tabulated-list-init-header))

(defun foveal--item-source (item)
  "What ITEM, a window item, came from: its file and lines, or its start."
  (let* ((metadata (plist-get item :metadata))
         (file (plist-get metadata :filename))
         (start (plist-get metadata :start_line))
         (end (plist-get metadata :end_line)))
    (cond ((and file start) (format "%s:%s-%s" file start (or end start)))
          (file file)
          (t (truncate-string-to-width
              (car (split-string (or (plist-get item :content) "") "\n"))
              60 nil nil "…")))))

(defun foveal--window-list-read ()
  "Read the host's window into the list's entries."
  (let* ((result (foveal--window (list :op "list" :types [])))
         (items (plist-get result :items))
         (tokens (plist-get result :tokens)))
    (setq tabulated-list-entries
          (seq-mapn (lambda (item count)
                      (list (plist-get item :id)
                            (vector (plist-get item :id)
                                    (plist-get item :type)
                                    (format "%s" (or count ""))
                                    (foveal--item-source item))))
                    items
                    (append tokens (make-list (length items) nil))))))

;;;###autoload
(defun foveal-window-list ()
  "List the host's context window: d to remove an item, C to clear it."
  (interactive)
  (let ((buffer (get-buffer-create "*foveal-window*")))
    (with-current-buffer buffer
      (foveal-window-list-mode)
      (foveal--window-list-read)
      (tabulated-list-print))
    (pop-to-buffer buffer)
    buffer))

(defun foveal-window-list-remove ()
  "Remove the item at point from the host's context window."
  (interactive)
  (let ((id (tabulated-list-get-id)))
    (unless id
      (user-error "No item at point"))
    (foveal--window (list :op "remove" :id id))
    (message "foveal: removed %s" id)
    (revert-buffer)))

(defun foveal-window-list-clear ()
  "Remove every item from the host's context window."
  (interactive)
  (when (yes-or-no-p "Remove every item of the context window? ")
    (foveal--window (list :op "clear"))
    (message "foveal: the context window is empty")
    (revert-buffer)))

;;;; The context

(defvar foveal-context-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'org-open-at-point)
    (define-key map "g" #'revert-buffer)
    (define-key map "q" #'quit-window)
    map)
  "Keys of `foveal-context-mode'.")

(define-derived-mode foveal-context-mode org-mode "foveal-context"
  "What the host's next cycle would see, read-only.
Each object shown is a link to its headline: RET opens it.
\\[revert-buffer] asks again.

\\{foveal-context-mode-map}"
  (setq-local revert-buffer-function (lambda (&rest _) (foveal-context)))
  (setq buffer-read-only t))

(defun foveal--context-text (reply)
  "The Org text showing REPLY, the host's answer to `context'."
  (require 'ol)
  (require 'org-src)
  (let ((objects (plist-get reply :objects)))
    (concat
     "#+TITLE: What the next cycle would see\n\n"
     "* Objects shown\n"
     (if objects
         (mapconcat
          (lambda (object)
            (format "- %s :: %s (%s)\n"
                    (org-link-make-string
                     (format "file:%s::%d" (plist-get object :file)
                             (plist-get object :line))
                     (plist-get object :title))
                    (plist-get object :reason)
                    (plist-get object :id)))
          objects "")
       "None.\n")
     "* Explained\n"
     "#+begin_example\n"
     (org-escape-code-in-string (plist-get reply :text))
     (if (string-suffix-p "\n" (plist-get reply :text)) "" "\n")
     "#+end_example\n")))

;;;###autoload
(defun foveal-context ()
  "Show what the host's next cycle would see, in a read-only Org buffer.
Each object shown is a link to its headline in the memex file."
  (interactive)
  (let* ((reply (condition-case err
                    (foveal--answer (list :cmd "context") "context")
                  (foveal-error (user-error "foveal: %s" (cadr err)))))
         (buffer (get-buffer-create "*foveal-context*")))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (unless (eq major-mode 'foveal-context-mode)
          (foveal-context-mode))
        (insert (foveal--context-text reply))
        (set-buffer-modified-p nil)
        (goto-char (point-min))
        (outline-show-all)))
    (pop-to-buffer buffer)
    buffer))

(provide 'foveal)

;;; foveal.el ends here
