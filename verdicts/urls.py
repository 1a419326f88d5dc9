from django.urls import path

from verdicts import apis, views

urlpatterns = [
    path(
        "api/v1/experiments/<int:experiment_id>/verdict/",
        apis.VerdictApi.as_view(),
        name="api-experiment-verdict",
    ),
    path(
        "api/v1/experiments/<int:experiment_id>/verdicts/",
        apis.VerdictHistoryApi.as_view(),
        name="api-experiment-verdicts",
    ),
    path(
        "api/v1/experiments/<int:experiment_id>/follow-up/",
        apis.FollowUpApi.as_view(),
        name="api-experiment-follow-up",
    ),
    path(
        "experiments/<int:experiment_id>/follow-up/",
        views.follow_up_page,
        name="experiment-follow-up",
    ),
]
