from django.urls import register_converter


class UsernameConverter:
    """A Django username (no ``~``), so ``<user>~<job>`` splits at the first ``~``."""

    regex = r"[\w.@+-]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(UsernameConverter, "username")
