import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { StartupError } from '@imagegen/platform';

const run = promisify(execFile);

/** The files of a development chain: the signer's key, its chain (leaf then intermediate) and the root (trust anchor). */
export interface DevelopmentChain {
  dir: string;
  keyFile: string;
  chainFile: string;
  rootFile: string;
}

/**
 * A self-signed development chain for Content Credentials, made with the openssl binary on first use and kept in
 * `dir` (the all-in-one's $DATA_DIR/c2pa): a root, an intermediate, and an ES256 leaf with digitalSignature and the
 * emailProtection EKU (what c2pa-rs accepts; no EKU, anyExtendedKeyUsage or codeSigning are refused). Later starts
 * reuse it. For development only: the root is trusted by nobody but this deployment's own C2PA_TRUST_ANCHORS.
 * (@peculiar/x509 2.x could make it in-process but needs the reflect-metadata polyfill, not a dependency here.)
 */
export async function ensureDevelopmentChain(dir: string): Promise<DevelopmentChain & { created: boolean }> {
  const files = { dir, keyFile: join(dir, 'signer.key'), chainFile: join(dir, 'chain.pem'), rootFile: join(dir, 'root.pem') };
  if (existsSync(files.keyFile) && existsSync(files.chainFile) && existsSync(files.rootFile)) return { ...files, created: false };
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const work = join(dir, '.making');
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { mode: 0o700 });
  const f = (name: string) => join(work, name);
  const ossl = async (...args: string[]) => {
    try {
      await run('openssl', args, { cwd: work });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stderr?: string };
      if (e.code === 'ENOENT')
        throw new StartupError(
          'openssl is needed to make the development Content Credentials chain: install it, or set C2PA_SIGNING_KEY and C2PA_SIGNING_CHAIN (or C2PA_SIGNING=off)',
        );
      throw new StartupError(
        `openssl failed while making the development Content Credentials chain: ${String(e.stderr ?? e.message).split('\n')[0]}`,
      );
    }
  };
  try {
    await writeFile(
      f('int.ext'),
      'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n',
    );
    await writeFile(
      f('leaf.ext'),
      'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=emailProtection\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n',
    );
    const days = '3650';
    await ossl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'root.key');
    await ossl(
      'req',
      '-x509',
      '-new',
      '-key',
      'root.key',
      '-sha256',
      '-days',
      days,
      '-subj',
      '/O=imagegen development/CN=imagegen development root (self-signed)',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
      '-addext',
      'subjectKeyIdentifier=hash',
      '-out',
      'root.pem',
    );
    await ossl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'int.key');
    await ossl(
      'req',
      '-new',
      '-key',
      'int.key',
      '-subj',
      '/O=imagegen development/CN=imagegen development intermediate',
      '-out',
      'int.csr',
    );
    await ossl(
      'x509',
      '-req',
      '-in',
      'int.csr',
      '-CA',
      'root.pem',
      '-CAkey',
      'root.key',
      '-CAcreateserial',
      '-days',
      days,
      '-sha256',
      '-extfile',
      'int.ext',
      '-out',
      'int.pem',
    );
    await ossl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'signer.key');
    await ossl(
      'req',
      '-new',
      '-key',
      'signer.key',
      '-subj',
      '/O=imagegen development/CN=imagegen development signer',
      '-out',
      'signer.csr',
    );
    await ossl(
      'x509',
      '-req',
      '-in',
      'signer.csr',
      '-CA',
      'int.pem',
      '-CAkey',
      'int.key',
      '-CAcreateserial',
      '-days',
      days,
      '-sha256',
      '-extfile',
      'leaf.ext',
      '-out',
      'signer.pem',
    );
    const chain = `${await readFile(f('signer.pem'), 'utf8')}${await readFile(f('int.pem'), 'utf8')}`;
    // The files the settings name; the CA keys are not kept (nothing signs with them again).
    await writeFile(files.rootFile, await readFile(f('root.pem')));
    await writeFile(files.chainFile, chain);
    await writeFile(files.keyFile, await readFile(f('signer.key')), { mode: 0o600 });
    await chmod(files.keyFile, 0o600);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return { ...files, created: true };
}
