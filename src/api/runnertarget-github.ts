// The GitHub side of a RunnerTarget: the org its runners register with, the
// repositories whose jobs the pool follows, the runner labels and group, and
// the credential it manages runners with. Names follow GitHub's own rules, and
// the labels the controller sets on runners itself are refused.

import { z } from 'zod';
import { kube, localSecretKeyRef, objectName, re } from './common.js';

export const DEFAULT_GITHUB_API_URL = 'https://api.github.com';
const APP_SECRET_NAMESPACE =
  'spec.github.appSecretRef.namespace is not allowed: the Secret must be in the namespace of the RunnerTarget; remove the namespace and create the Secret here';

/** Runner labels the controller sets itself (the target's UID and the installation); a spec may not claim them. */
const OWNER_LABEL_PREFIX = 'leasehold-';
const OWNER_LABEL_MESSAGE = `labels must not start with ${OWNER_LABEL_PREFIX}: the controller labels each runner with its RunnerTarget and installation under that prefix; choose another label`;

/** What a host does once its just-in-time runner has finished its one job. */
export const HOST_REUSE_MODES = ['ephemeral', 'reuse'] as const;

const GITHUB_NAME = '[A-Za-z0-9]([A-Za-z0-9-]{0,37}[A-Za-z0-9])?';
const GITHUB_REPO = '[A-Za-z0-9._-]{1,100}';

export const GitHubSchema = kube(
  z
    .object({
      org: z
        .string()
        .max(39)
        .regex(re(`^${GITHUB_NAME}$`))
        .describe('GitHub organization the runners register with.'),
      repositories: z
        .array(
          z
            .string()
            .max(140)
            .regex(re(`^${GITHUB_NAME}/${GITHUB_REPO}$`))
            .describe('A repository as owner/name.'),
        )
        .min(1)
        .max(64)
        .describe('Repositories whose queued and running jobs the pool follows, as owner/name.'),
      labels: z
        .array(
          kube(
            z
              .string()
              .min(1)
              .max(128)
              .refine((l) => !l.toLowerCase().startsWith(OWNER_LABEL_PREFIX), { message: OWNER_LABEL_MESSAGE }),
            { description: 'A runner label.', 'x-kubernetes-validations': [{ rule: `!self.lowerAscii().startsWith('${OWNER_LABEL_PREFIX}')`, message: OWNER_LABEL_MESSAGE }] },
          ),
        )
        .max(32)
        .optional()
        .describe(
          'Labels the runners get besides self-hosted, linux and x64. A queued job counts when it asks for every one of these and the runners have every label of its runs-on; omit to count every job the runners can take.',
        ),
      runnerGroup: z
        .string()
        .min(1)
        .max(128)
        .default('Default')
        .describe(
          "Name of the org's runner group the runners join, exactly as GitHub shows it; the group must let the followed repositories use it. Defaults to Default.",
        ),
      hostReuse: z
        .enum(HOST_REUSE_MODES)
        .default('ephemeral')
        .describe(
          'What a host does after its runner finished a job. ephemeral (the default): one job per VM; the host is drained and deleted, and a new VM takes the next job. reuse: while a job the runners can take is queued, the host gets a new just-in-time runner over SSH instead (never a host being preempted or near spec.gce.maxRunDuration); jobs then share a VM one after another, so use it only for repositories that trust each other.',
        ),
      tokenSecretRef: localSecretKeyRef(
        'The Secret key, in the namespace of the RunnerTarget, holding a GitHub token that may manage runners of the org.',
        { defaultKey: 'token', keyMeaning: 'the token', field: 'spec.github.tokenSecretRef' },
      ).optional(),
      appSecretRef: kube(
        z
          .object({
            name: objectName('Name of the Secret, in the namespace of the RunnerTarget, with keys appID, installationID and privateKey (PEM).'),
            namespace: z
              .string()
              .max(63)
              .optional()
              .describe('Not allowed: the Secret is always read from the namespace of the RunnerTarget.'),
          })
          .strict()
          .refine((r) => r.namespace === undefined, { message: APP_SECRET_NAMESPACE, path: ['namespace'] }),
        {
          description: 'A Secret with the credentials of a GitHub App installed on the org, instead of a token.',
          'x-kubernetes-validations': [{ rule: '!has(self.namespace)', message: APP_SECRET_NAMESPACE }],
        },
      ).optional(),
      apiURL: z
        .url({ protocol: /^https?$/ })
        .max(2048)
        .default(DEFAULT_GITHUB_API_URL)
        .describe('Base URL of the GitHub REST API. Defaults to https://api.github.com.'),
      webhookSecretRef: localSecretKeyRef(
        "The Secret key, in the namespace of the RunnerTarget, holding the secret of the org's or repositories' GitHub webhook that sends workflow_job events to the controller (--github-webhook-port). A delivery signed with it makes a check of this target happen at once instead of at the next checkInterval; the periodic check still decides what to launch or delete. Omit to ignore webhooks for this target.",
        { defaultKey: 'secret', keyMeaning: 'the webhook secret', field: 'spec.github.webhookSecretRef' },
      ).optional(),
      rerunPreemptedJobs: z
        .boolean()
        .default(false)
        .describe(
          'When a spot preemption cuts a job, ask GitHub once to re-run the failed jobs of its workflow run after the run concludes as failure (needs actions write on the repositories). Defaults to false: the cut job is only reported.',
        ),
    })
    .strict()
    .refine((g) => (g.tokenSecretRef === undefined) !== (g.appSecretRef === undefined), {
      message: 'github takes exactly one of tokenSecretRef or appSecretRef',
    }),
  {
    description: 'Where the runners register and which jobs they follow.',
    'x-kubernetes-validations': [
      {
        rule: 'has(self.tokenSecretRef) != has(self.appSecretRef)',
        message: 'github takes exactly one of tokenSecretRef or appSecretRef',
      },
    ],
  },
);
