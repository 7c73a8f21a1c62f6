# syntax=docker/dockerfile:1
# Multi-stage: type-check and compile with dev dependencies, ship only dist/ and production dependencies
# on Node 24 LTS, as a non-root user; the chart runs it with a read-only root filesystem.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist ./dist
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["run"]
