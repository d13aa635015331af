// One scripted run of kafkajs, for tools/record_clients.py.
//
//   NODE_PATH=<kafkajs install>/node_modules node driver.js BOOTSTRAP PREFIX TOPIC COUNT
//
// Steps, each bounded and printed as "STEP <label> ok|FAILED <why>": produce COUNT records,
// consume them in a group and commit, an admin call (list and create topics), produce once
// more under the default client.id. kafkajs has no version setting: no pin.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const STEP_MS = 15000;
const [bootstrap, prefix, topic, countText] = process.argv.slice(2);
const count = Number(countText);

function kafka(clientId) {
  const config = { brokers: [bootstrap], logLevel: logLevel.ERROR, connectionTimeout: 10000,
                   requestTimeout: 10000, retry: { retries: 2 } };
  if (clientId) config.clientId = clientId;
  return new Kafka(config);
}

function bounded(promise) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('timed out')), STEP_MS + 5000); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function step(label, body) {
  const started = Date.now();
  try {
    await bounded(body());
    console.log(`STEP ${label} ok ${((Date.now() - started) / 1000).toFixed(1)}s`);
    return 0;
  } catch (error) {   // one step failing must not lose the others' traffic
    console.log(`STEP ${label} FAILED ${error.name}: ${String(error.message).replace(/\n/g, ' ')}`);
    return 1;
  }
}

async function produce(clientId) {
  const producer = kafka(clientId).producer();
  await producer.connect();
  try {
    const messages = [];
    for (let i = 0; i < count; i++) messages.push({ key: 'k', value: `{"n":${i}}` });
    await producer.send({ topic, messages });
  } finally {
    await producer.disconnect();
  }
}

async function group() {
  const consumer = kafka(`${prefix}-group`).consumer({ groupId: `${prefix}-readers`, maxWaitTimeInMs: 50 });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let seen = 0;
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${seen} of ${count} records`)), STEP_MS);
      consumer.run({
        autoCommit: false,
        eachMessage: async ({ topic: t, partition, message }) => {
          seen += 1;
          if (seen >= count) {
            await consumer.commitOffsets([{ topic: t, partition, offset: String(Number(message.offset) + 1) }]);
            clearTimeout(timer);
            resolve();
          }
        },
      }).catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
}

async function admin() {
  const client = kafka(`${prefix}-admin`).admin();
  await client.connect();
  try {
    await client.listTopics();
    await client.createTopics({ topics: [{ topic: `${prefix}-created`, numPartitions: 1, replicationFactor: 1 }] });
  } finally {
    await client.disconnect();
  }
}

(async () => {
  let failed = 0;
  failed += await step('producer', () => produce(`${prefix}-producer`));
  failed += await step('group', group);
  failed += await step('admin', admin);
  failed += await step('default-id-producer', () => produce(undefined));
  process.exit(failed);
})();
