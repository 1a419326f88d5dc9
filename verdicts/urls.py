from django.urls import path

from verdicts import apis

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
]
