# syntax=docker/dockerfile:1

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -o /out/tidemark ./cmd/tidemark

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin tidemark \
    && mkdir -p /data && chown tidemark:tidemark /data
COPY --from=build /out/tidemark /usr/local/bin/tidemark
USER tidemark
VOLUME /data
EXPOSE 4222 8090
ENTRYPOINT ["tidemark"]
CMD ["serve", "--data-dir", "/data", "--listen", "0.0.0.0:4222", "--http", "0.0.0.0:8090"]
