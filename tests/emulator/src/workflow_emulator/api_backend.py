"""A stand-in for the Pulumi Cloud backend API, which the stand-in executor uses instead:
GET and PUT /api/stand-in/backend/{org}, the organization's DIY-backend `.pulumi/` tree as a tar
(backend_store.py), with a deployment job's PULUMI_ACCESS_TOKEN. Not a route of the real
service: the real executor talks to Pulumi Cloud's own API."""

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from workflow_emulator.api import Api, bearer, ok, read_raw
from workflow_emulator.errors import ApiError
from workflow_emulator.store import check_org

MAX_TAR = 64 * 1024 * 1024
TAR = "application/x-tar"


class BackendApi(Api):
    async def backend(self, request: Request) -> Response:
        org = check_org(request.path_params["org"])
        job = self.store.job_for_stack_token(bearer(request))
        where = job["deployment"]
        if where["org"] != org:
            name = f"{where['org']}/{where['project']}/{where['stack']}"
            raise ApiError(403, f"the access token of {name} is not valid for organization {org}")
        if request.method == "PUT":
            return ok(self.store.put_backend(where, await read_raw(request, MAX_TAR)))
        return Response(self.store.backend_tar(org), media_type=TAR)

    def routes(self) -> list[Route]:
        return [Route("/api/stand-in/backend/{org}", self.backend, methods=["GET", "PUT"])]
