"""What every app's REST API shares: the OpenAPI shapes and errors it documents
(``openapi.py``), errors answered as OpenPAI answers them (``errors.py``), parsers that refuse
what could not be stored (``parsers.py``), rate limits (``throttling.py``) and what an
application token may not do (``permissions.py``). No models: any app may use it."""
