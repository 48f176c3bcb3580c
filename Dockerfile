# syntax=docker/dockerfile:1
#
# electd as a static, non-root container image:
#
#   docker build -t electd:dev --build-arg VERSION=$(git describe --always) .
#   docker run --rm electd:dev version
#
# The final image holds one static binary (CGO_ENABLED=0) on distroless
# "static" (CA certificates, /etc/passwd with "nonroot", no shell, no package
# manager) and runs as uid 65532. It is electd's production build (package
# internal/release says why each flag): -tags noembed leaves out the embedded
# etcd that only `demo` and `dev` use, grpcnotrace and urfave_cli_no_docs two
# libraries' pages that electd never runs. To wrap a command, build your own image
# FROM your application's and COPY --from=this one /usr/local/bin/electd,
# or copy the binary in with an init container (examples/kubernetes).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first: this layer is cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -tags noembed,grpcnotrace,urfave_cli_no_docs \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/electd ./cmd/electd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/electd /usr/local/bin/electd
# uid/gid 65532 ("nonroot" in distroless' /etc/passwd).
USER 65532:65532
EXPOSE 4040
ENTRYPOINT ["/usr/local/bin/electd"]
CMD ["--help"]
