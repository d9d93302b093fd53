import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings.local")

application = get_wsgi_application()

# Import every view now, then take what start-up built out of the collector's reach: a full collection
# scans every object the process holds (~150k here, 80 ms on a quiet core), stopping all the worker's
# threads and each stream they relay (bench/stream_load.py: the proxy's time-to-first-byte p99).
get_resolver().url_patterns  # noqa: B018 (the URL conf imports the views)
gc.freeze()
