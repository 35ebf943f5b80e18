# syntax=docker/dockerfile:1
# The Leasehold controller image: `docker build -t REGISTRY/leasehold:TAG .`
# No image is published; build this and push it where your cluster pulls from.

# Build: compile src/, controllers/ and cmd/ to dist/ (tsconfig.build.json).
FROM node:20-bookworm AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY controllers ./controllers
COPY cmd ./cmd
COPY cli ./cli
RUN npm run build

# Runtime: production dependencies and the compiled JavaScript only. The SSH
# client (ssh2) is pure JavaScript, so no OpenSSH is installed; install
# scripts are skipped (ssh2's optional native speed-ups are not needed).
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
# tini as PID 1 reaps what provider commands leave behind: a grandchild whose
# parent exited is re-parented to PID 1, and node would never wait for it.
RUN apt-get update && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist ./dist
# The image's "node" user, by number so runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8080
ENTRYPOINT ["tini", "--", "node", "dist/cmd/controller.js"]
