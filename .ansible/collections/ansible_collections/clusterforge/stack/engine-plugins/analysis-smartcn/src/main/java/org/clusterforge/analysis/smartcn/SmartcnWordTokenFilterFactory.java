package org.clusterforge.analysis.smartcn;

import org.apache.lucene.analysis.TokenStream;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractTokenFilterFactory;

/**
 * The deprecated {@code smartcn_word} filter: it passes tokens through unchanged, because
 * {@code smartcn_tokenizer} already yields words. It exists only so old mappings still load.
 */
public final class SmartcnWordTokenFilterFactory extends AbstractTokenFilterFactory {

    public SmartcnWordTokenFilterFactory(
            IndexSettings indexSettings, Environment environment, String name, Settings settings) {
        super(indexSettings, name, settings);
    }

    @Override
    public TokenStream create(TokenStream tokenStream) {
        return tokenStream;
    }
}
