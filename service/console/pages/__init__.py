"""The console's pages: one router per resource, as the API has (sign-in, deployments, traces, analyses, jobs)."""
