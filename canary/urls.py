from django.urls import path, re_path

from canary import views

app_name = "canary"

urlpatterns = [
    path("", views.experiment_list, name="experiment-list"),
    path("<str:name>/", views.experiment_detail, name="experiment-detail"),
    re_path(
        r"^(?P<name>[-a-z0-9_.]+)/(?P<action>start|pause|resume|ramp|rollback|promote)/$",
        views.experiment_action,
        name="experiment-action",
    ),
]
