# One image for web, workers and beat; docker-compose picks the command.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORKDIR /app
# The runtime lock only: the development tools (requirements-dev.txt) stay out of the image.
COPY requirements.txt .
# torch from the CPU index here; a GPU image swaps this line for the CUDA wheel index.
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt
COPY . .
# The translation catalogues are compiled here (msgfmt, from gettext), as `make messages` does.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gettext && rm -rf /var/lib/apt/lists/* \
    && msgfmt --check -o locale/zh_Hans/LC_MESSAGES/django.mo locale/zh_Hans/LC_MESSAGES/django.po
RUN DJANGO_SETTINGS_MODULE=evalhub.settings.local python manage.py collectstatic --noinput -v 0
EXPOSE 8000
CMD ["gunicorn", "evalhub.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
