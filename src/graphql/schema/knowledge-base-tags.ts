import {
  attachTags,
  createTag,
  deleteTag,
  detachTags,
  getTag,
  type KbTagRow,
  listTags,
  tagLabelSchema,
  tagLabelsSchema,
  updateTag,
} from '../../kb/tags';
import { requireOwned, requireProjectOrKeyProject } from '../access';
import { builder } from '../builder';

/**
 * Knowledge-base tags (docs/knowledge-base.md "Tags"): labels of a project attached to documents,
 * which the query's `tags` member selects documents by. The original's v3alpha routes map here.
 */

const KbTagType = builder.objectRef<KbTagRow>('KnowledgeBaseTag').implement({
  description: 'A label of a project’s knowledge base, attached to documents to choose which ones a query reads.',
  fields: (t) => ({
    tagID: t.exposeID('id'),
    label: t.exposeString('label', { description: 'Unique in the project.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const KbQueryTagsMatchInput = builder.inputType('KnowledgeBaseQueryTagsMatch', {
  fields: (t) => ({
    items: t.stringList({ description: 'Tag labels.' }),
    operator: t.string({ description: '"and" (all of the items) or "or" (any of them).' }),
  }),
});

export const KbQueryTagsInput = builder.inputType('KnowledgeBaseQueryTags', {
  description:
    'Which documents may answer, by their tags: those matching `include` (default operator "or"), or tagged with `includeAllTagged`, or untagged with `includeAllNonTagged` (none given: all), less those matching `exclude` (default operator "and").',
  fields: (t) => ({
    include: t.field({ type: KbQueryTagsMatchInput }),
    exclude: t.field({ type: KbQueryTagsMatchInput }),
    includeAllTagged: t.boolean(),
    includeAllNonTagged: t.boolean(),
  }),
});

builder.queryFields((t) => ({
  knowledgeBaseTags: t.field({
    type: [KbTagType],
    description: "The project's knowledge-base tags, by label.",
    authScopes: { scope: 'kb:read' },
    args: { projectID: t.arg.id({ description: "Default: the API key's project." }) },
    resolve: async (_root, args, ctx) => {
      const project = await requireProjectOrKeyProject(ctx, args.projectID ? String(args.projectID) : null);
      return listTags(ctx.services.db, project.id);
    },
  }),
  knowledgeBaseTag: t.field({
    type: KbTagType,
    authScopes: { scope: 'kb:read' },
    args: { tagID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const tagId = String(args.tagID);
      const project = await requireOwned(ctx, 'Tag', tagId);
      return getTag(ctx.services.db, { projectId: project.id, tagId });
    },
  }),
}));

builder.mutationFields((t) => ({
  createKnowledgeBaseTag: t.field({
    type: KbTagType,
    description: 'Creates a tag; a label the project already has is a 409.',
    authScopes: { scope: 'kb:write' },
    args: {
      projectID: t.arg.id({ description: "Default: the API key's project." }),
      label: t.arg.string({ required: true, validate: tagLabelSchema }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProjectOrKeyProject(ctx, args.projectID ? String(args.projectID) : null);
      return createTag(ctx.services.db, { projectId: project.id, label: args.label });
    },
  }),
  updateKnowledgeBaseTag: t.field({
    type: KbTagType,
    description: 'Relabels a tag (documents keep it); a label the project already has is a 409.',
    authScopes: { scope: 'kb:write' },
    args: {
      tagID: t.arg.id({ required: true }),
      label: t.arg.string({ required: true, validate: tagLabelSchema }),
    },
    resolve: async (_root, args, ctx) => {
      const tagId = String(args.tagID);
      const project = await requireOwned(ctx, 'Tag', tagId);
      return updateTag(ctx.services.db, { projectId: project.id, tagId, label: args.label });
    },
  }),
  deleteKnowledgeBaseTag: t.boolean({
    description: 'Deletes a tag and detaches it from every document.',
    authScopes: { scope: 'kb:write' },
    args: { tagID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const tagId = String(args.tagID);
      const project = await requireOwned(ctx, 'Tag', tagId);
      await deleteTag(ctx.services.db, { projectId: project.id, tagId });
      return true;
    },
  }),
  attachKnowledgeBaseTags: t.prismaField({
    type: 'KbDocument',
    description: 'Attaches existing tags (by label) to a document; an unknown label is a 404 and nothing changes.',
    authScopes: { scope: 'kb:write' },
    args: {
      documentID: t.arg.id({ required: true }),
      tags: t.arg.stringList({ required: true, validate: tagLabelsSchema }),
    },
    resolve: async (query, _root, args, ctx) => {
      const documentId = String(args.documentID);
      const project = await requireOwned(ctx, 'Document', documentId);
      await attachTags(ctx.services.db, { projectId: project.id, documentId, labels: args.tags });
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: documentId } });
    },
  }),
  detachKnowledgeBaseTags: t.prismaField({
    type: 'KbDocument',
    description:
      'Detaches tags (by label) from a document; an unknown label is a 404, one not attached changes nothing.',
    authScopes: { scope: 'kb:write' },
    args: {
      documentID: t.arg.id({ required: true }),
      tags: t.arg.stringList({ required: true, validate: tagLabelsSchema }),
    },
    resolve: async (query, _root, args, ctx) => {
      const documentId = String(args.documentID);
      const project = await requireOwned(ctx, 'Document', documentId);
      await detachTags(ctx.services.db, { projectId: project.id, documentId, labels: args.tags });
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: documentId } });
    },
  }),
}));
