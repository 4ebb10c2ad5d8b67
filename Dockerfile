# roomcell image: the server and the operator CLI. Built from the repo root:
#   docker build -t roomcell:dev .
# The same image runs every role (room, wallet, relay, notice); the
# configuration file and environment choose (deploy/docker-compose.yml,
# deploy/k8s/).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# What --version prints: docker build --build-arg VERSION=v1.2.3 .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/hyapp/roomcell/internal/buildinfo.Version=${VERSION}" -o /out/roomcell ./cmd/roomcell \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/hyapp/roomcell/internal/buildinfo.Version=${VERSION}" -o /out/roomctl ./cmd/roomctl

# alpine rather than distroless: busybox wget serves the compose health
# check and sleep serves the Kubernetes preStop hook.
FROM alpine:3.20
RUN apk add --no-cache ca-certificates tzdata \
 && adduser -D -H -u 10001 roomcell
COPY --from=build /out/roomcell /out/roomctl /usr/local/bin/
COPY configs/config.docker.yaml /etc/roomcell/config.yaml
USER 10001
# 13001 gRPC API, 13101 /healthz /readyz /metrics, 7000 cluster remote.
EXPOSE 13001 13101 7000
ENTRYPOINT ["/usr/local/bin/roomcell"]
CMD ["--config", "/etc/roomcell/config.yaml"]
