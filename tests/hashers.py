"""A quick password hasher for tests: Django's PBKDF2 with few iterations.

Hashes it makes carry their iteration count, so the standard hasher (in a browser test's
server process) still verifies them.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1000
