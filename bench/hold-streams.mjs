// Opens N server-sent event streams from a separate process, so that the bench measures the
// server's memory alone. Prints "ready" once every stream has its first trace, "first-end" when
// the first stream ends (a measure taken after it did not hold every stream open), "done" when
// all have ended. Arguments: a JSON object {urls: string[], headers, body}.
import { request } from 'node:http';

const { urls, headers, body } = JSON.parse(process.argv[2]);
let first = 0;
let ended = 0;
for (const url of urls) {
  const target = new URL(url);
  let gotFirst = false;
  const req = request(
    { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers, agent: false },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
        if (!gotFirst && text.includes('event: trace')) {
          gotFirst = true;
          if (++first === urls.length) console.log('ready');
        }
      });
      res.on('end', () => {
        if (!text.includes('event: end')) console.error(`stream without end: ${text.slice(0, 200)}`);
        if (ended === 0) console.log('first-end');
        if (++ended === urls.length) {
          console.log('done');
          process.exit(0);
        }
      });
    },
  );
  req.on('error', (err) => {
    console.error(err.message);
    process.exit(1);
  });
  req.end(body);
}
