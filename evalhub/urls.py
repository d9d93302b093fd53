from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from evalhub.api import canary as canary_apis
from evalhub.api import common
from evalhub.api import gate as gate_apis
from evalhub.api import registry as registry_apis
from evalhub.api import reviews as review_apis
from evalhub.views import accounts, gate_runs, reviews, versions
from evalhub.views import canary as canary_views
from evalhub.views import forms as work

NAME = r"(?P<name>[-a-zA-Z0-9_.]+)"
api_v1 = (
    [
        # The chat apps' routes first: Django keeps every pattern it tried on the request, which a
        # stream holds for its whole answer.
        re_path(
            rf"^canary/{NAME}/v1/chat/completions/?$",
            canary_apis.ChatCompletionsProxyApi.as_view(),
            name="canary-proxy",
        ),
        re_path(rf"^canary/{NAME}/v1/models/?$", canary_apis.ModelsProxyApi.as_view(), name="canary-models"),
        path("model-versions/", registry_apis.ModelVersionListApi.as_view(), name="model-version-list"),
        path(
            "model-versions/<str:ref>/",
            registry_apis.ModelVersionDetailApi.as_view(),
            name="model-version-detail",
        ),
        path(
            "model-versions/<str:ref>/transition/",
            registry_apis.ModelVersionTransitionApi.as_view(),
            name="model-version-transition",
        ),
        path(
            "model-versions/<str:ref>/serving-url/",
            registry_apis.ModelVersionServingApi.as_view(),
            name="model-version-serving",
        ),
        path("eval-suites/", registry_apis.EvalSuiteListApi.as_view(), name="eval-suite-list"),
        path("eval-suites/<str:ref>/", registry_apis.EvalSuiteDetailApi.as_view(), name="eval-suite-detail"),
        path(
            "eval-suites/<str:ref>/items/", registry_apis.EvalSuiteItemsApi.as_view(), name="eval-suite-items"
        ),
        path(
            "eval-suites/<str:ref>/from-reviews/",
            review_apis.SuiteFromReviewsApi.as_view(),
            name="eval-suite-from-reviews",
        ),
        path("gate-runs/", gate_apis.GateRunListApi.as_view(), name="gate-run-list"),
        path("gate-runs/<int:pk>/", gate_apis.GateRunDetailApi.as_view(), name="gate-run-detail"),
        path("gate-runs/<int:pk>/cancel/", gate_apis.GateRunCancelApi.as_view(), name="gate-run-cancel"),
        path(
            "gate-runs/<int:pk>/adversarial.jsonl",
            gate_apis.GateRunAdversarialApi.as_view(),
            name="gate-run-adversarial",
        ),
        path(
            "gate-runs/<int:pk>/shift-examples.jsonl",
            gate_apis.GateRunShiftExamplesApi.as_view(),
            name="gate-run-shift-examples",
        ),
        path("gate-runs/<int:pk>/samples/", gate_apis.GateRunSamplesApi.as_view(), name="gate-run-samples"),
        path("gate-runs/<int:pk>/report/", gate_apis.GateRunReportApi.as_view(), name="gate-run-report"),
        path("decisions/", gate_apis.DecisionListApi.as_view(), name="decision-list"),
        path("decisions/<int:pk>/", gate_apis.DecisionDetailApi.as_view(), name="decision-detail"),
        path("canary/experiments/", canary_apis.ExperimentListApi.as_view(), name="experiment-list"),
        path("canary/probe-sets/", canary_apis.ProbeSetListApi.as_view(), name="probe-set-list"),
        path(
            "canary/experiments/<slug:name>/",
            canary_apis.ExperimentDetailApi.as_view(),
            name="experiment-detail",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/(?P<action>start|pause|resume|ramp|rollback|promote)/?$",
            canary_apis.ExperimentActionApi.as_view(),
            name="experiment-action",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/plan/?$",
            canary_apis.ExperimentPlanApi.as_view(),
            name="experiment-plan",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/unblind/?$",
            canary_apis.ExperimentUnblindApi.as_view(),
            name="experiment-unblind",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/analyses/?$",
            canary_apis.ExperimentAnalysisApi.as_view(),
            name="experiment-analyses",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/probe-runs/?$",
            canary_apis.ProbeRunListApi.as_view(),
            name="experiment-probe-runs",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/reviews/?$",
            review_apis.ReviewListApi.as_view(),
            name="experiment-reviews",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/reviews/next/?$",
            review_apis.ReviewNextApi.as_view(),
            name="experiment-reviews-next",
        ),
        re_path(
            rf"^canary/experiments/{NAME}/reviews/export/?$",
            review_apis.ReviewExportApi.as_view(),
            name="experiment-reviews-export",
        ),
        re_path(rf"^canary/{NAME}/assign/?$", canary_apis.AssignApi.as_view(), name="canary-assign"),
        re_path(r"^events/?$", canary_apis.EventsApi.as_view(), name="events"),
        re_path(r"^[\s\S]*$", common.ApiNotFound.as_view(), name="not-found"),
    ],
    "api",
)

canary_pages = (
    [
        path("", canary_views.experiment_list, name="experiment-list"),
        re_path(r"^(?P<name>[-a-z0-9_.]+)/probes/$", work.experiment_probes, name="experiment-probes"),
        path("<str:name>/", canary_views.experiment_detail, name="experiment-detail"),
        re_path(
            r"^(?P<name>[-a-z0-9_.]+)/(?P<action>start|pause|resume|ramp|rollback|promote)/$",
            canary_views.experiment_action,
            name="experiment-action",
        ),
        re_path(
            r"^(?P<name>[-a-z0-9_.]+)/unblind/$", canary_views.experiment_unblind, name="experiment-unblind"
        ),
    ],
    "canary",
)

urlpatterns = [
    path("api/v1/", include(api_v1)),  # first, as its chat routes (above)
    path("", versions.version_list, name="home"),
    path("versions/<str:ref>/", versions.version_detail, name="version-detail"),
    path("versions/<str:ref>/decide/", versions.version_decide, name="version-decide"),
    path("suites/<str:ref>/", versions.suite_detail, name="suite-detail"),
    path("gate-runs/<int:pk>/", gate_runs.gate_run_detail, name="gate-run-detail"),
    path("gate-runs/<int:pk>/cancel/", gate_runs.gate_run_cancel_page, name="gate-run-cancel"),
    # The work without curl (the same services as the API).
    path("new/version/", work.version_register, name="version-new"),
    path("new/suite/", work.suite_upload, name="suite-new"),
    path("new/gate-run/", work.gate_run_new, name="gate-run-new"),
    path("new/experiment/", work.experiment_new, name="experiment-new"),
    path("canary/", include(canary_pages)),
    path("review/", reviews.review_list, name="review-list"),
    path("review/<str:name>/", reviews.review_queue, name="review-queue"),
    path("review/<str:name>/export.jsonl", reviews.review_export, name="review-export"),
    path("review/<str:name>/suite/", reviews.review_suite_build, name="review-suite-build"),
    path("login/", accounts.sign_in, name="login"),
    path("logout/", accounts.sign_out, name="logout"),
    # POST /i18n/setlang/ {language, next}: the language switch, remembered in a cookie.
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
]
