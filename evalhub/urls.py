from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from canary import apis as canary_apis
from evalhub import apis, views

api_v1 = (
    [
        path("model-versions/", apis.ModelVersionListApi.as_view(), name="model-version-list"),
        path("model-versions/<str:ref>/", apis.ModelVersionDetailApi.as_view(), name="model-version-detail"),
        path(
            "model-versions/<str:ref>/transition/",
            apis.ModelVersionTransitionApi.as_view(),
            name="model-version-transition",
        ),
        path("eval-suites/", apis.EvalSuiteListApi.as_view(), name="eval-suite-list"),
        path("eval-suites/<str:ref>/", apis.EvalSuiteDetailApi.as_view(), name="eval-suite-detail"),
        path("eval-suites/<str:ref>/items/", apis.EvalSuiteItemsApi.as_view(), name="eval-suite-items"),
        path("gate-runs/", apis.GateRunListApi.as_view(), name="gate-run-list"),
        path("gate-runs/<int:pk>/", apis.GateRunDetailApi.as_view(), name="gate-run-detail"),
        path("gate-runs/<int:pk>/samples/", apis.GateRunSamplesApi.as_view(), name="gate-run-samples"),
        path("gate-runs/<int:pk>/report/", apis.GateRunReportApi.as_view(), name="gate-run-report"),
        path("decisions/", apis.DecisionListApi.as_view(), name="decision-list"),
        path("decisions/<int:pk>/", apis.DecisionDetailApi.as_view(), name="decision-detail"),
        path("canary/experiments/", canary_apis.ExperimentListApi.as_view(), name="experiment-list"),
        path("canary/probe-sets/", canary_apis.ProbeSetListApi.as_view(), name="probe-set-list"),
        path(
            "canary/experiments/<slug:name>/",
            canary_apis.ExperimentDetailApi.as_view(),
            name="experiment-detail",
        ),
        re_path(
            r"^canary/experiments/(?P<name>[-a-zA-Z0-9_.]+)/(?P<action>start|pause|resume|ramp|rollback|promote)/?$",
            canary_apis.ExperimentActionApi.as_view(),
            name="experiment-action",
        ),
        re_path(
            r"^canary/experiments/(?P<name>[-a-zA-Z0-9_.]+)/analyses/?$",
            canary_apis.ExperimentAnalysisApi.as_view(),
            name="experiment-analyses",
        ),
        re_path(
            r"^canary/experiments/(?P<name>[-a-zA-Z0-9_.]+)/probe-runs/?$",
            canary_apis.ProbeRunListApi.as_view(),
            name="experiment-probe-runs",
        ),
        re_path(
            r"^canary/(?P<name>[-a-zA-Z0-9_.]+)/assign/?$",
            canary_apis.AssignApi.as_view(),
            name="canary-assign",
        ),
        re_path(
            r"^canary/(?P<name>[-a-zA-Z0-9_.]+)/v1/chat/completions/?$",
            canary_apis.ChatCompletionsProxyApi.as_view(),
            name="canary-proxy",
        ),
        re_path(r"^events/?$", canary_apis.EventsApi.as_view(), name="events"),
        re_path(r"^.*$", apis.ApiNotFound.as_view(), name="not-found"),
    ],
    "api",
)

urlpatterns = [
    path("", views.version_list, name="home"),
    path("versions/<str:ref>/", views.version_detail, name="version-detail"),
    path("versions/<str:ref>/decide/", views.version_decide, name="version-decide"),
    path("gate-runs/<int:pk>/", views.gate_run_detail, name="gate-run-detail"),
    path("canary/", include("canary.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api/v1/", include(api_v1)),
]
