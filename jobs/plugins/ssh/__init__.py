"""The ssh plugin: the job's key pair (``keys.py``, made at its first launch, kept on the Job)
and what it does inside a task (``script.py``: the keys and an ssh config in
``$PAI_WORK_DIR/.ssh``, the image's sshd on the task's ``ssh`` port)."""
